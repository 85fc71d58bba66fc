package unet.javia;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.management.ManagementFactory;
import java.nio.ByteBuffer;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * No garbage per message: the Javia-I recvPost/recvWait path (and send)
 * and Javia-II allocate nothing once warm, measured with the JDK's thread
 * allocation counter over a million messages.
 */
class AllocationTest {
    private static final int WARM = 1_000_000;
    private static final int N = 1_000_000;
    /** Bytes a thread may allocate over the N messages (class loading, a stray). */
    private static final long SLACK = 64 * 1024;

    @BeforeAll
    static void engine() throws Exception {
        TestEngine.ensure();
    }

    private static long allocated() {
        return ((com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean())
                .getCurrentThreadAllocatedBytes();
    }

    @Test
    void javiaIAllocatesNothingPerMessage() throws Exception {
        Vi[] p = JaviaITest.pair(new ViAttributes());
        try (Vi tx = p[0]; Vi rx = p[1]) {
            Peer<Long> sender = Peer.start("javia-i sender", () -> {
                byte[] m = new byte[64];
                for (int i = 0; i < WARM; i++) {
                    tx.send(m, 0, 64);
                }
                long before = allocated();
                for (int i = 0; i < N; i++) {
                    tx.send(m, 0, 64);
                }
                return allocated() - before;
            });
            ViBATicket[] ts = new ViBATicket[32];
            for (int k = 0; k < ts.length; k++) {
                ts[k] = new ViBATicket(new byte[64], 0);
                rx.recvPost(ts[k]);
            }
            long recvBytes;
            try {
                for (int i = 0; i < WARM; i++) {
                    rx.recvPost(rx.recvWait(10_000_000));
                }
                long before = allocated();
                for (int i = 0; i < N; i++) {
                    rx.recvPost(rx.recvWait(10_000_000));
                }
                recvBytes = allocated() - before;
            } catch (ViException e) {
                throw sender.failed(e);
            }
            long sendBytes = sender.get(120);
            System.out.printf("Javia-I: recvPost/recvWait %.4f bytes/message, send %.4f bytes/message%n",
                    (double) recvBytes / N, (double) sendBytes / N);
            assertTrue(recvBytes <= SLACK, "recvPost/recvWait allocated " + recvBytes + " bytes over " + N);
            assertTrue(sendBytes <= SLACK, "send allocated " + sendBytes + " bytes over " + N);
        }
    }

    @Test
    void javiaIIAllocatesNothingPerMessage() throws Exception {
        Vi[] p = JaviaITest.pair(new ViAttributes());
        Vi rx = p[1];
        try (Vi tx = p[0]) {
            Peer<Long> sender = Peer.start("javia-ii sender", () -> {
                ViBuffer vb = new ViBuffer(64);
                ByteBuffer b = vb.toByteArray();
                ViBufferTicket t = vb.register(tx, new ViBufferAttributes());
                long before = 0;
                for (int i = 0; i < WARM + N; i++) {
                    if (i == WARM) {
                        before = allocated();
                    }
                    b.put(0, (byte) i);
                    tx.sendBufPost(t, 0, 64);
                    tx.sendBufWait(10_000_000);
                }
                long bytes = allocated() - before;
                vb.unregister(t);
                vb.close();
                return bytes;
            });
            ViBuffer rb = new ViBuffer(32 * 64);
            ViBufferTicket[] ts = new ViBufferTicket[32];
            for (int k = 0; k < ts.length; k++) {
                ts[k] = rb.register(rx, new ViBufferAttributes());
                rx.recvBufPost(ts[k], k * 64);
            }
            long before = 0;
            try {
                for (int i = 0; i < WARM + N; i++) {
                    if (i == WARM) {
                        before = allocated();
                    }
                    ViBufferTicket t = rx.recvBufWait(10_000_000);
                    rx.recvBufPost(t, (i % 32) * 64);
                }
            } catch (ViException e) {
                throw sender.failed(e);
            }
            long recvBytes = allocated() - before;
            long sendBytes = sender.get(120);
            System.out.printf("Javia-II: recvBufPost/recvBufWait %.4f bytes/message,"
                    + " sendBufPost/sendBufWait %.4f bytes/message%n", (double) recvBytes / N, (double) sendBytes / N);
            assertTrue(recvBytes <= SLACK, "recvBufPost/recvBufWait allocated " + recvBytes + " bytes over " + N);
            assertTrue(sendBytes <= SLACK, "sendBufPost/sendBufWait allocated " + sendBytes + " bytes over " + N);
            rx.close();
            for (ViBufferTicket t : ts) {
                assertTrue(t.isDone(), "closing completes the tickets still posted");
                rb.unregister(t);
            }
            rb.close();
        }
    }
}
