package unet.javia;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * A confined VI ({@link ViAttributes#setConfined}) takes no lock: it works
 * from the thread that made it, and every call from another thread fails
 * with {@link WrongThreadException} and changes nothing.
 */
class ConfinedTest {
    @BeforeAll
    static void engine() throws Exception {
        TestEngine.ensure();
    }

    /** A shared VI connected (on a helper thread) to a confined one accepted on this thread. */
    private static Vi[] sharedAndConfined() throws Exception {
        int tag = JaviaITest.TAGS.incrementAndGet();
        try (ServerVi sv = new ServerVi(tag)) {
            Peer<Vi> a = Peer.start("connect to tag " + tag,
                    () -> new Vi(ViAddress.LOCAL, new ViAttributes(), null, null, tag));
            Vi b = sv.accept(new ViAttributes().setConfined(true), 10_000_000);
            return new Vi[] {a.get(10), b};
        }
    }

    /** What {@code body} throws on a thread of its own (null: nothing). */
    private static Throwable onAnotherThread(ThrowingBody body) throws InterruptedException {
        Throwable[] got = new Throwable[1];
        Thread t = new Thread(() -> {
            try {
                body.run();
            } catch (Throwable e) {
                got[0] = e;
            }
        }, "not the Vi's thread");
        t.start();
        t.join(10_000);
        assertFalse(t.isAlive(), "the call from another thread did not return");
        return got[0];
    }

    interface ThrowingBody {
        void run() throws Exception;
    }

    private static void assertWrongThread(Throwable e) {
        assertTrue(e instanceof WrongThreadException, "expected WrongThreadException, got " + e);
        assertTrue(e.getMessage().contains("confined"), e.getMessage());
    }

    @Test
    void aConfinedViWorksOnItsThreadAndRefusesEveryOther() throws Exception {
        Vi[] p = sharedAndConfined();
        Vi shared = p[0];
        Vi confined = p[1];
        assertTrue(confined.attributes().isConfined());
        assertFalse(shared.attributes().isConfined());
        ViBuffer vb = new ViBuffer(4096);
        try {
            // Javia-I out of the confined end, from this thread.
            byte[] m = JaviaITest.message(1, 100);
            confined.send(m, 0, 50);
            assertArrayEquals(java.util.Arrays.copyOf(m, 50), shared.recv(10_000_000));

            // Javia-II into it (a VI takes receives one way at a time).
            ViBufferTicket t = vb.register(confined, new ViBufferAttributes());
            MemorySegment s = vb.segment();
            confined.recvBufPost(t, 0);

            // From another thread, each call fails and changes nothing.
            assertWrongThread(onAnotherThread(() -> confined.send(m, 0, 10)));
            assertWrongThread(onAnotherThread(() -> confined.recvBufWait(0)));
            assertWrongThread(onAnotherThread(() -> confined.flush(0)));
            assertWrongThread(onAnotherThread(() -> vb.unregister(t)));
            assertWrongThread(onAnotherThread(confined::close));

            // The posted receive is still there, and takes the next message.
            shared.send(m, 0, 64);
            ViBufferTicket back = confined.recvBufWait(10_000_000);
            assertSame(t, back);
            assertEquals(64, back.getLength());
            for (int i = 0; i < 64; i++) {
                assertEquals(m[i], s.get(ValueLayout.JAVA_BYTE, i));
            }
            // And goes back out, without a copy.
            confined.sendBufPost(t, 0, 64);
            assertSame(t, confined.sendBufWait(10_000_000));
            assertArrayEquals(java.util.Arrays.copyOf(m, 64), shared.recv(10_000_000));
            vb.unregister(t);
        } finally {
            confined.close();
            shared.close();
        }
        vb.close();
        // Closed on its own thread: closed.
        assertThrows(ViException.class, () -> confined.send(new byte[1], 0, 1));
    }
}
