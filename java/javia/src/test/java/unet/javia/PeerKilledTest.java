package unet.javia;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * A peer JVM killed mid-stream: the surviving VI breaks with the peer gone
 * within a few seconds, every ticket still posted completes with that
 * error, nothing completes as a success afterwards, and a new connection
 * on the same tag works.
 */
class PeerKilledTest {
    @BeforeAll
    static void engine() throws Exception {
        TestEngine.ensure();
    }

    @Test
    void aKilledPeerBreaksTheViAndFailsEveryPostedTicket() throws Exception {
        int tag = 7777;
        try (ServerVi sv = new ServerVi(tag)) {
            Process peer = TestEngine.jvm(Streamer.class, Integer.toString(tag));
            try {
                Vi vi = sv.accept(new ViAttributes(), 30_000_000);
                assertEquals("STREAMING", TestEngine.line(peer));
                ViBATicket[] ts = new ViBATicket[8];
                for (int k = 0; k < ts.length; k++) {
                    ts[k] = new ViBATicket(new byte[1024], 0);
                    vi.recvPost(ts[k]);
                }
                for (int i = 0; i < 1000; i++) {
                    ViBATicket t = vi.recvWait(10_000_000);
                    assertEquals(1024, t.getLength());
                    vi.recvPost(t);
                }
                peer.destroyForcibly();
                long t0 = System.nanoTime();
                ViException e = null;
                // Messages already in the ring arrive first; then the break.
                while (e == null) {
                    try {
                        ViBATicket t = vi.recvWait(10_000_000);
                        vi.recvPost(t);
                    } catch (ViException x) {
                        e = x;
                    }
                }
                long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
                assertEquals("UNET_VI_PEER_GONE", e.viError(), e.getMessage());
                assertTrue(ms < 10_000, "broken within 10 s, took " + ms + " ms");
                for (ViBATicket t : ts) {
                    assertTrue(t.isDone(), "every posted ticket completed");
                    assertEquals("UNET_VI_PEER_GONE", t.getError(), "with the reason");
                }
                ViException again = assertThrows(ViException.class, () -> vi.recvWait(1000));
                assertEquals("UNET_VI_PEER_GONE", again.viError());
                vi.close();
            } finally {
                peer.destroyForcibly();
                peer.waitFor(10, TimeUnit.SECONDS);
            }
            // The tag serves a new connection.
            Peer<Vi> a = Peer.start("connect to tag " + tag,
                    () -> new Vi(ViAddress.LOCAL, new ViAttributes(), null, null, tag));
            try (Vi b = sv.accept(new ViAttributes(), 10_000_000); Vi c = a.get(10)) {
                c.send(new byte[] {9}, 0, 1);
                assertEquals(9, b.recv(10_000_000)[0]);
            }
        }
    }
}
