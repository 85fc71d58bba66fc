package unet.javia;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.api.Test;

/** Javia-I between two VIs of one JVM on the local path. */
class JaviaITest {
    static final AtomicInteger TAGS = new AtomicInteger(1000);

    @BeforeAll
    static void engine() throws Exception {
        TestEngine.ensure();
    }

    /** A connected pair: [0] connected, [1] accepted. */
    static Vi[] pair(ViAttributes attrs) throws Exception {
        int tag = TAGS.incrementAndGet();
        try (ServerVi sv = new ServerVi(tag)) {
            Peer<Vi> a = Peer.start("connect to tag " + tag, () -> new Vi(ViAddress.LOCAL, attrs, null, null, tag));
            Vi b = sv.accept(attrs, 10_000_000);
            return new Vi[] {a.get(10), b};
        }
    }

    static byte[] message(long seq, int len) {
        byte[] m = new byte[len];
        Random r = new Random(seq);
        r.nextBytes(m);
        return m;
    }

    static int sizeOf(long seq) {
        // Mixed sizes: mostly small, some up to 32 KiB.
        Random r = new Random(seq * 31 + 7);
        int k = r.nextInt(100);
        return k < 60 ? r.nextInt(129) : k < 90 ? r.nextInt(4097) : r.nextInt(32 * 1024 + 1);
    }

    @ParameterizedTest
    @EnumSource(ViAttributes.Reliability.class)
    void hundredThousandMixedMessagesArriveInOrderWithTheirContent(ViAttributes.Reliability level)
            throws Exception {
        // send copies, sendInPlace hands the array over: alternated, order
        // and content hold across the two modes.
        ViAttributes attrs = new ViAttributes().setReliability(level).setMaxMessageSize(32 * 1024)
                .setInPlaceFrom(Integer.MAX_VALUE);
        Vi[] p = pair(attrs);
        final int n = 100_000;
        try (Vi tx = p[0]; Vi rx = p[1]) {
            Peer<Void> sender = Peer.run("javia-i sender", () -> {
                for (int i = 0; i < n; i++) {
                    if (i % 2 == 0) {
                        tx.send(message(i, sizeOf(i)), 0, sizeOf(i));
                    } else {
                        tx.sendInPlace(message(i, sizeOf(i)), 0, sizeOf(i));
                    }
                }
                tx.flush(Vi.INFINITE);
            });
            ViBATicket[] tickets = new ViBATicket[16];
            for (int k = 0; k < tickets.length; k++) {
                tickets[k] = new ViBATicket(new byte[32 * 1024], 0);
                rx.recvPost(tickets[k]);
            }
            for (int i = 0; i < n; i++) {
                ViBATicket t;
                try {
                    t = rx.recvWait(10_000_000);
                } catch (ViException e) {
                    throw sender.failed(e);
                }
                assertTrue(t.isDone());
                byte[] want = message(i, sizeOf(i));
                assertEquals(want.length, t.getLength(), "length of message " + i);
                byte[] got = java.util.Arrays.copyOf(t.getByteArray(), t.getLength());
                assertArrayEquals(want, got, "content of message " + i);
                rx.recvPost(t);
            }
            sender.get(60);
        }
    }

    @Test
    void recvAllocatesAnArrayOfTheMessagesLength() throws Exception {
        Vi[] p = pair(new ViAttributes());
        try (Vi tx = p[0]; Vi rx = p[1]) {
            for (int i = 0; i < 100; i++) {
                byte[] m = message(i, i * 3);
                tx.send(m, 0, m.length);
                assertArrayEquals(m, rx.recv(10_000_000));
            }
            // The array given to send may be reused at once.
            byte[] m = message(7, 50);
            tx.send(m, 0, 50);
            java.util.Arrays.fill(m, (byte) 0);
            assertArrayEquals(message(7, 50), rx.recv(10_000_000));
        }
    }

    @Test
    void timeoutsBadArgumentsAndUseAfterCloseFailClearly() throws Exception {
        Vi[] p = pair(new ViAttributes().setMaxMessageSize(1024));
        Vi tx = p[0];
        Vi rx = p[1];
        rx.recvPost(new ViBATicket(new byte[64], 0));
        long t0 = System.nanoTime();
        assertThrows(ViTimeout.class, () -> rx.recvWait(20_000));
        assertTrue(System.nanoTime() - t0 >= 20_000_000L, "waited its 20 ms");
        ViException e = assertThrows(ViException.class, () -> tx.send(new byte[10], 5, 6));
        assertTrue(e.getMessage().contains("do not fit"), e.getMessage());
        e = assertThrows(ViException.class, () -> tx.send(new byte[2048], 0, 2048));
        assertTrue(e.getMessage().contains("maxMessageSize"), e.getMessage());
        e = assertThrows(ViException.class, () -> rx.recv(1000));
        assertTrue(e.getMessage().contains("are posted on this Vi"), e.getMessage());
        tx.close();
        tx.close();
        e = assertThrows(ViException.class, () -> tx.send(new byte[1], 0, 1));
        assertTrue(e.getMessage().contains("closed"), e.getMessage());
        // The peer's close breaks this VI: its posted ticket completes with
        // the reason, and the wait says why.
        e = assertThrows(ViException.class, () -> rx.recvWait(10_000_000));
        assertEquals("UNET_VI_PEER_GONE", e.viError(), e.getMessage());
        rx.close();
    }

    @Test
    void aTooLongMessageBreaksTheViWithTheReason() throws Exception {
        Vi[] p = pair(new ViAttributes());
        try (Vi tx = p[0]; Vi rx = p[1]) {
            ViBATicket t = new ViBATicket(new byte[16], 0);
            rx.recvPost(t);
            tx.send(new byte[100], 0, 100);
            ViException e = assertThrows(ViException.class, () -> rx.recvWait(10_000_000));
            assertEquals("UNET_VI_TOO_LONG", e.viError());
            assertTrue(t.isDone());
            assertEquals("UNET_VI_TOO_LONG", t.getError());
        }
    }

    @Test
    void severalThreadsSendOnOneVi() throws Exception {
        Vi[] p = pair(new ViAttributes());
        final int threads = 4;
        final int each = 5_000;
        try (Vi tx = p[0]; Vi rx = p[1]) {
            List<Peer<Void>> fs = new ArrayList<>();
            for (int k = 0; k < threads; k++) {
                final int who = k;
                fs.add(Peer.run("sender " + k, () -> {
                    byte[] m = new byte[8];
                    for (int i = 0; i < each; i++) {
                        m[0] = (byte) who;
                        java.nio.ByteBuffer.wrap(m).putInt(4, i);
                        tx.send(m, 0, 8);
                    }
                }));
            }
            int[] next = new int[threads];
            for (int i = 0; i < threads * each; i++) {
                byte[] m;
                try {
                    m = rx.recv(10_000_000);
                } catch (ViException e) {
                    AssertionError a = new AssertionError("receiving message " + i + ": " + e, e);
                    for (Peer<Void> f : fs) {
                        a.addSuppressed(f.failed(e));
                    }
                    throw a;
                }
                assertNotNull(m);
                int who = m[0];
                int seq = java.nio.ByteBuffer.wrap(m).getInt(4);
                assertEquals(next[who], seq, "each sender's messages in order");
                next[who]++;
            }
            for (Peer<Void> f : fs) {
                f.get(60);
            }
        }
    }
}
