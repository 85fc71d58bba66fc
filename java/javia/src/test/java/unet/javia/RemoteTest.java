package unet.javia;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import unet.javia.examples.Table1Recv;
import unet.javia.examples.Table1Send;
import unet.javia.examples.Table2Recv;
import unet.javia.examples.Table2Send;

/**
 * Javia between two engines over UDP loopback: each JVM talks to its own
 * daemon, and a {@code ViAddress} of {@code HOST:PORT} names the other's
 * wire.
 */
class RemoteTest {
    @BeforeAll
    static void engines() throws Exception {
        TestEngine.ensure();
        TestEngine.second();
    }

    @Test
    void table1RunsBetweenTwoEngines() throws Exception {
        Table1Test.tablePair(TestEngine.second().socket(), Table1Recv.class, Table1Send.class,
                TestEngine.second().wire(), "RECEIVED 100 bytes, sum 4950");
    }

    @Test
    void table2RunsBetweenTwoEngines() throws Exception {
        Table1Test.tablePair(TestEngine.second().socket(), Table2Recv.class, Table2Send.class,
                TestEngine.second().wire(), "RECEIVED 100 bytes, sum 9900");
    }

    @ParameterizedTest
    @EnumSource(ViAttributes.Reliability.class)
    void mixedMessagesComeBackFromAnEchoBehindAnotherEngine(ViAttributes.Reliability level) throws Exception {
        TestEngine.Daemon b = TestEngine.second();
        int tag = 9000 + level.ordinal();
        Process echo = TestEngine.jvmOn(b.socket(), Echo.class, Integer.toString(tag), level.name());
        try {
            assertEquals("LISTENING", TestEngine.line(echo));
            ViAttributes attrs = new ViAttributes().setReliability(level).setMaxMessageSize(32 * 1024);
            // Unreliable may lose; the reliable levels carry all of them.
            final int n = level == ViAttributes.Reliability.UNRELIABLE ? 2_000 : 20_000;
            final int window = 16;
            try (Vi vi = new Vi(new ViAddress(b.wire()), attrs, null, null, tag)) {
                ViBATicket[] ts = new ViBATicket[window];
                for (int k = 0; k < window; k++) {
                    ts[k] = new ViBATicket(new byte[32 * 1024], 0);
                    vi.recvPost(ts[k]);
                }
                Peer<Void> sender = Peer.run("sender to the echo", () -> {
                    for (int i = 0; i < n; i++) {
                        byte[] m = JaviaITest.message(i, JaviaITest.sizeOf(i));
                        vi.send(m, 0, m.length);
                        // Unreliable: stay within the echo's window so
                        // that nothing is lost for want of a buffer.
                        if (level == ViAttributes.Reliability.UNRELIABLE) {
                            Thread.sleep(0, 200_000);
                        }
                    }
                });
                if (level == ViAttributes.Reliability.UNRELIABLE) {
                    // Loopback rarely loses: most come back, in order.
                    int got = 0;
                    try {
                        while (got < n) {
                            ViBATicket t = vi.recvWait(2_000_000);
                            got++;
                            vi.recvPost(t);
                        }
                    } catch (ViTimeout e) {
                        // The rest were lost.
                    }
                    assertTrue(got >= n * 9 / 10, "most messages came back: " + got + " of " + n);
                } else {
                    for (int i = 0; i < n; i++) {
                        ViBATicket t;
                        try {
                            t = vi.recvWait(30_000_000);
                        } catch (ViException e) {
                            throw sender.failed(e);
                        }
                        byte[] want = JaviaITest.message(i, JaviaITest.sizeOf(i));
                        assertEquals(want.length, t.getLength(), "length of message " + i);
                        assertArrayEquals(want, java.util.Arrays.copyOf(t.getByteArray(), t.getLength()),
                                "content of message " + i);
                        vi.recvPost(t);
                    }
                }
                sender.get(120);
            }
            assertTrue(echo.waitFor(30, TimeUnit.SECONDS), "the echo ends when the VI closes");
        } finally {
            echo.destroyForcibly();
        }
    }
}
