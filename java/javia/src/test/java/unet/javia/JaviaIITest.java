package unet.javia;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.ref.WeakReference;
import java.nio.ByteBuffer;
import java.nio.IntBuffer;
import java.util.ArrayDeque;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/** Javia-II: registered buffers, typed views, tickets, freeing. */
class JaviaIITest {
    @BeforeAll
    static void engine() throws Exception {
        TestEngine.ensure();
    }

    @ParameterizedTest
    @EnumSource(ViAttributes.Reliability.class)
    void hundredThousandMixedMessagesThroughBuffersWithoutCopy(ViAttributes.Reliability level) throws Exception {
        ViAttributes attrs = new ViAttributes().setReliability(level);
        Vi[] p = JaviaITest.pair(attrs);
        final int n = 100_000;
        final int slots = 16;
        final int slotSize = 32 * 1024;
        try (Vi tx = p[0]; Vi rx = p[1]) {
            Peer<Void> sender = Peer.run("javia-ii sender", () -> {
                ViBuffer vb = new ViBuffer(slots * slotSize);
                ByteBuffer b = vb.toByteArray();
                ViBufferTicket[] ts = new ViBufferTicket[slots];
                ArrayDeque<Integer> free = new ArrayDeque<>();
                for (int k = 0; k < slots; k++) {
                    ts[k] = vb.register(tx, new ViBufferAttributes());
                    free.add(k);
                }
                for (int i = 0; i < n; i++) {
                    if (free.isEmpty()) {
                        ViBufferTicket done = tx.sendBufWait(10_000_000);
                        for (int k = 0; k < slots; k++) {
                            if (ts[k] == done) {
                                free.add(k);
                            }
                        }
                    }
                    int k = free.poll();
                    byte[] m = JaviaITest.message(i, JaviaITest.sizeOf(i));
                    b.put(k * slotSize, m);
                    tx.sendBufPost(ts[k], k * slotSize, m.length);
                }
                for (int k = free.size(); k < slots; k++) {
                    tx.sendBufWait(10_000_000);
                }
                for (ViBufferTicket t : ts) {
                    vb.unregister(t);
                }
                vb.close();
            });
            ViBuffer rb = new ViBuffer(slots * slotSize);
            ByteBuffer view = rb.toByteArray();
            ViBufferTicket[] ts = new ViBufferTicket[slots];
            for (int k = 0; k < slots; k++) {
                ts[k] = rb.register(rx, new ViBufferAttributes());
                rx.recvBufPost(ts[k], k * slotSize);
            }
            byte[] got = new byte[slotSize];
            for (int i = 0; i < n; i++) {
                ViBufferTicket t;
                try {
                    t = rx.recvBufWait(10_000_000);
                } catch (ViException e) {
                    throw sender.failed(e);
                }
                int k = i % slots;
                assertTrue(t == ts[k], "tickets come back in the order posted");
                byte[] want = JaviaITest.message(i, JaviaITest.sizeOf(i));
                assertEquals(want.length, t.getLength(), "length of message " + i);
                view.get(k * slotSize, got, 0, want.length);
                assertTrue(java.util.Arrays.equals(want, 0, want.length, got, 0, want.length),
                        "content of message " + i);
                rx.recvBufPost(t, k * slotSize);
            }
            sender.get(60);
        }
    }

    /**
     * A ping-pong of sizes on both sides of the library's reference
     * threshold (2048 bytes) on the path lent to Javia: the small ones
     * copied through the ring, the large ones read by the peer from the
     * sender's buffer; content and order hold, and every message goes by
     * the lent path.
     */
    @ParameterizedTest
    @EnumSource(value = ViAttributes.Reliability.class, names = {"UNRELIABLE", "RELIABLE_DELIVERY"})
    void theLentPathCarriesSmallMessagesThroughTheRingAndLargeOnesByReference(ViAttributes.Reliability level)
            throws Exception {
        ViAttributes attrs = new ViAttributes().setReliability(level);
        Vi[] p = JaviaITest.pair(attrs);
        int[] sizes = {0, 1, 64, 2047, 2048, 5000, 100, 32768, 7, 1999};
        final int n = 3000;
        try (Vi a = p[0]; Vi b = p[1]) {
            Peer<Void> echo = Peer.run("echo", () -> {
                ViBuffer eb = new ViBuffer(32768);
                ViBufferTicket t = eb.register(b, new ViBufferAttributes());
                for (int i = 0; i < n; i++) {
                    b.recvBufPost(t, 0);
                    ViBufferTicket got = b.recvBufWait(10_000_000);
                    b.sendBufPost(got, 0, got.getLength());
                    b.sendBufWait(10_000_000);
                }
                eb.unregister(t);
                eb.close();
            });
            ViBuffer out = new ViBuffer(32768);
            ViBuffer in = new ViBuffer(32768);
            ViBufferTicket to = out.register(a, new ViBufferAttributes());
            ViBufferTicket ti = in.register(a, new ViBufferAttributes());
            int lent = 0;
            for (int i = 0; i < n; i++) {
                int len = sizes[i % sizes.length];
                byte[] m = JaviaITest.message(i, len);
                out.segment().asByteBuffer().put(0, m);
                a.recvBufPost(ti, 0);
                a.sendBufPost(to, 0, len);
                if (a.pathLent()) {
                    lent++;
                }
                assertTrue(a.sendBufWait(10_000_000) == to);
                ViBufferTicket got;
                try {
                    got = a.recvBufWait(10_000_000);
                } catch (ViException e) {
                    throw echo.failed(e);
                }
                assertTrue(got == ti);
                assertEquals(len, got.getLength(), "length of echo " + i);
                byte[] back = new byte[len];
                in.segment().asByteBuffer().get(0, back);
                assertTrue(java.util.Arrays.equals(m, back), "content of echo " + i);
            }
            echo.get(60);
            assertEquals(n, lent, "every message went by the lent path");
            out.unregister(to);
            in.unregister(ti);
            out.close();
            in.close();
        }
    }

    /**
     * A send by reference the peer has not read yet when the lent path
     * goes back to the library (here a Javia-I send takes it back): the
     * library completes it once the peer reads it, in order with what
     * follows.
     */
    @Test
    void aSendByReferenceUnreadWhenThePathGoesBackCompletesThroughTheLibrary() throws Exception {
        Vi[] p = JaviaITest.pair(new ViAttributes());
        try (Vi a = p[0]; Vi b = p[1]) {
            ViBuffer out = new ViBuffer(8192);
            ViBufferTicket to = out.register(a, new ViBufferAttributes());
            byte[] big = JaviaITest.message(1, 5000);
            out.segment().asByteBuffer().put(0, big);
            a.sendBufPost(to, 0, big.length);
            assertTrue(a.pathLent(), "sent on the lent path");
            assertTrue(!to.isDone(), "not read yet: not done");
            byte[] small = JaviaITest.message(2, 10);
            a.send(small, 0, small.length);
            assertTrue(!a.pathLent(), "a Javia-I send takes the path back");
            ViBuffer in = new ViBuffer(8192);
            ViBufferTicket ti = in.register(b, new ViBufferAttributes());
            byte[] got = new byte[5000];
            b.recvBufPost(ti, 0);
            assertEquals(5000, b.recvBufWait(5_000_000).getLength());
            in.segment().asByteBuffer().get(0, got);
            assertTrue(java.util.Arrays.equals(big, got), "the message read from the sender's buffer");
            b.recvBufPost(ti, 0);
            assertEquals(10, b.recvBufWait(5_000_000).getLength());
            assertTrue(a.sendBufWait(5_000_000) == to);
            assertTrue(to.isDone() && to.getError() == null && to.getLength() == 5000);
            a.flush(5_000_000);
            out.unregister(to);
            in.unregister(ti);
            out.close();
            in.close();
        }
    }

    /**
     * Receives posted in the library while the path was back there come
     * over with it when Javia borrows it again, and messages land in them
     * in the order they were posted.
     */
    @Test
    void receivesPostedInTheLibraryComeBackWithThePath() throws Exception {
        Vi[] p = JaviaITest.pair(new ViAttributes());
        try (Vi a = p[0]; Vi b = p[1]) {
            ViBuffer in = new ViBuffer(4 * 256);
            ViBufferTicket[] ts = new ViBufferTicket[4];
            for (int k = 0; k < 4; k++) {
                ts[k] = in.register(a, new ViBufferAttributes());
                a.recvBufPost(ts[k], k * 256);
            }
            assertTrue(a.pathLent(), "held on the lent path");
            a.send(new byte[3], 0, 3);
            assertTrue(!a.pathLent(), "a Javia-I send takes the path back, the receives with it");
            a.flush(5_000_000);
            ViBuffer rb = new ViBuffer(256);
            ViBufferTicket rt = rb.register(b, new ViBufferAttributes());
            b.recvBufPost(rt, 0);
            assertEquals(3, b.recvBufWait(5_000_000).getLength());
            ViBuffer out = new ViBuffer(100);
            ViBufferTicket to = out.register(a, new ViBufferAttributes());
            a.sendBufPost(to, 0, 100);
            assertTrue(a.pathLent(), "borrowed again, with the library's receives");
            assertTrue(a.sendBufWait(5_000_000) == to);
            b.recvBufPost(rt, 0);
            assertEquals(100, b.recvBufWait(5_000_000).getLength());
            for (int k = 0; k < 4; k++) {
                rb.segment().set(java.lang.foreign.ValueLayout.JAVA_BYTE, 0, (byte) (10 + k));
                b.sendBufPost(rt, 0, 1 + k);
                assertTrue(b.sendBufWait(5_000_000) == rt);
            }
            for (int k = 0; k < 4; k++) {
                ViBufferTicket t = a.recvBufWait(5_000_000);
                assertTrue(t == ts[k], "receives complete in the order posted");
                assertEquals(1 + k, t.getLength());
                assertEquals((byte) (10 + k), in.segment().get(java.lang.foreign.ValueLayout.JAVA_BYTE, k * 256L));
            }
            for (ViBufferTicket t : ts) {
                in.unregister(t);
            }
            out.unregister(to);
            rb.unregister(rt);
            in.close();
            out.close();
            rb.close();
        }
    }

    /**
     * A reference of several segments, each in a region of its own (as the
     * library's senders make them; a Javia sender's is one buffer, one
     * segment), read by a Javia receiver on the lent path: each segment
     * from its region, in order, at their offsets; the path stays lent
     * (nothing was left for the library).
     */
    @Test
    void aReferenceOfSeveralSegmentsIsReadFromEachRegionOnTheLentPath() throws Throwable {
        Vi[] p = JaviaITest.pair(new ViAttributes());
        try (Vi a = p[0]; Vi b = p[1]; Arena arena = Arena.ofConfined()) {
            ViBuffer x = new ViBuffer(8192);
            ViBuffer y = new ViBuffer(8192);
            ViBufferTicket tx = x.register(a, new ViBufferAttributes());
            ViBufferTicket ty = y.register(a, new ViBufferAttributes());
            ViBuffer in = new ViBuffer(8192);
            ViBufferTicket ti = in.register(b, new ViBufferAttributes());
            b.recvBufPost(ti, 0);
            assertTrue(b.pathLent(), "the receive is held on the lent path");
            // The sender's library path (its VI has posted nothing through
            // Javia, so nothing is lent): one send of three segments, 6000
            // bytes, by reference (over the threshold of 2048).
            byte[] m = JaviaITest.message(3, 6000);
            x.segment().asByteBuffer().put(100, m, 0, 2500);
            y.segment().asByteBuffer().put(50, m, 2500, 3000);
            x.segment().asByteBuffer().put(7000, m, 5500, 500);
            MemorySegment d = arena.allocate(72, 8);
            long[][] segs = {{100, 2500}, {50, 3000}, {7000, 500}};
            ViBuffer[] from = {x, y, x};
            for (int i = 0; i < 3; i++) {
                d.set(ValueLayout.ADDRESS, 24L * i, from[i].region());
                d.set(ValueLayout.JAVA_LONG, 24L * i + 8, segs[i][0]);
                d.set(ValueLayout.JAVA_LONG, 24L * i + 16, segs[i][1]);
            }
            int r = (int) Native.POST_SEND.invokeExact(a.handleAddress(), 77L, d.address(), 3L);
            assertEquals(0, r, "the library's post of three segments");
            ViBufferTicket got = b.recvBufWait(5_000_000);
            assertTrue(got == ti);
            assertEquals(6000, got.getLength());
            byte[] back = new byte[6000];
            in.segment().asByteBuffer().get(0, back);
            assertTrue(java.util.Arrays.equals(m, back), "the three segments, in order");
            assertTrue(b.pathLent(), "read by Javia, not left for the library");
            // The next message comes by the same ring, after the reference.
            d.set(ValueLayout.ADDRESS, 0, y.region());
            d.set(ValueLayout.JAVA_LONG, 8, 60);
            d.set(ValueLayout.JAVA_LONG, 16, 64);
            b.recvBufPost(ti, 0);
            r = (int) Native.POST_SEND.invokeExact(a.handleAddress(), 78L, d.address(), 1L);
            assertEquals(0, r, "the library's post of 64 bytes");
            assertEquals(64, b.recvBufWait(5_000_000).getLength());
            assertEquals(m[2510], in.segment().get(ValueLayout.JAVA_BYTE, 0));
            x.unregister(tx);
            y.unregister(ty);
            in.unregister(ti);
            x.close();
            y.close();
            in.close();
        }
    }

    @Test
    void theFirstViewFixesTheElementTypeAndViewsShareTheMemory() throws Exception {
        try (ViBuffer vb = new ViBuffer(64)) {
            IntBuffer ints = vb.toIntArray();
            ints.put(3, 0x01020304);
            assertEquals(16, ints.capacity());
            assertEquals(0x01020304, vb.toIntArray().get(3), "the same memory");
            IllegalStateException e = assertThrows(IllegalStateException.class, vb::toByteArray);
            assertTrue(e.getMessage().contains("IntBuffer"), e.getMessage());
            assertThrows(IllegalStateException.class, vb::segment);
        }
    }

    @Test
    void aViewUsedAfterCloseFailsInsteadOfTouchingReusedMemory() throws Exception {
        ViBuffer vb = new ViBuffer(4096);
        ByteBuffer b = vb.toByteArray();
        b.put(0, (byte) 7);
        vb.close();
        assertThrows(IllegalStateException.class, () -> b.get(0));
        assertThrows(IllegalStateException.class, () -> b.put(1, (byte) 1));
        assertThrows(IllegalStateException.class, vb::toByteArray);
        vb.close();
    }

    @Test
    void unregisterWhilePostedAndFreeWhileRegisteredFail() throws Exception {
        Vi[] p = JaviaITest.pair(new ViAttributes());
        try (Vi tx = p[0]; Vi rx = p[1]) {
            ViBuffer vb = new ViBuffer(1024);
            ViBufferTicket t = vb.register(rx, new ViBufferAttributes());
            rx.recvBufPost(t, 0);
            ViException e = assertThrows(ViException.class, () -> vb.unregister(t));
            assertTrue(e.getMessage().contains("still in use"), e.getMessage());
            e = assertThrows(ViException.class, () -> vb.free(null));
            assertTrue(e.getMessage().contains("still registered"), e.getMessage());
            e = assertThrows(ViException.class, () -> rx.recvBufPost(t, 0));
            assertTrue(e.getMessage().contains("already posted"), e.getMessage());
            e = assertThrows(ViException.class, () -> tx.sendBufPost(t, 0, 10));
            assertTrue(e.getMessage().contains("another Vi"), e.getMessage());
            tx.send(new byte[] {1, 2, 3}, 0, 3);
            ViBufferTicket done = rx.recvBufWait(10_000_000);
            assertTrue(done == t && t.isDone());
            assertEquals(3, t.getLength());
            assertEquals(2, vb.toByteArray().get(1));
            vb.unregister(t);
            vb.close();
        }
    }

    @Test
    void freeReleasesOnlyOnceNoViewIsReachableThenCallsBack() throws Exception {
        ViBuffer vb = new ViBuffer(1 << 16);
        ByteBuffer view = vb.toByteArray();
        view.put(0, (byte) 42);
        CountDownLatch released = new CountDownLatch(1);
        vb.free(size -> released.countDown());
        // A view still held keeps the memory: it stays usable, and nothing
        // is released however often the collector runs.
        for (int i = 0; i < 3; i++) {
            System.gc();
            assertTrue(!released.await(50, TimeUnit.MILLISECONDS), "released while a view is reachable");
        }
        assertEquals(42, view.get(0));
        WeakReference<ByteBuffer> gone = new WeakReference<>(view);
        view = null;
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (released.getCount() > 0 && System.nanoTime() < end) {
            System.gc();
            released.await(50, TimeUnit.MILLISECONDS);
        }
        assertEquals(0, released.getCount(), "released once no view was reachable");
        assertTrue(gone.get() == null);
        assertThrows(ViException.class, () -> vb.free(null));
        assertThrows(IllegalStateException.class, vb::toByteArray);
    }
}
