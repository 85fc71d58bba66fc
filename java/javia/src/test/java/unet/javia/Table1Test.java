package unet.javia;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import unet.javia.examples.Table1Recv;
import unet.javia.examples.Table1Send;
import unet.javia.examples.Table2Recv;
import unet.javia.examples.Table2Send;

/** The paper's Table 1 and Table 2 programs, as shipped, between two JVMs on this host. */
class Table1Test {
    @BeforeAll
    static void engine() throws Exception {
        TestEngine.ensure();
    }

    /**
     * Run {@code recvMain} in a JVM on {@code recvSocket}'s engine (null:
     * this JVM's), then {@code sendMain} toward {@code machine}; the
     * receiver must print {@code want}.
     */
    static void tablePair(String recvSocket, Class<?> recvMain, Class<?> sendMain, String machine, String want)
            throws Exception {
        Process recv = TestEngine.jvmOn(recvSocket, recvMain);
        try {
            assertEquals("LISTENING", TestEngine.line(recv));
            Process send = TestEngine.jvm(sendMain, machine);
            assertTrue(send.waitFor(60, TimeUnit.SECONDS), "the sender finishes");
            assertEquals(0, send.exitValue(), "the sender succeeds");
            assertEquals(want, TestEngine.line(recv));
            assertTrue(recv.waitFor(60, TimeUnit.SECONDS), "the receiver finishes");
            assertEquals(0, recv.exitValue(), "the receiver succeeds");
        } finally {
            recv.destroyForcibly();
        }
    }

    @Test
    void table1SendAndRecvRunBetweenTwoJvms() throws Exception {
        // 0 + 1 + ... + 99
        tablePair(null, Table1Recv.class, Table1Send.class, "local", "RECEIVED 100 bytes, sum 4950");
    }

    @Test
    void table2SendAndRecvRunBetweenTwoJvms() throws Exception {
        // 2 * (0 + 1 + ... + 99)
        tablePair(null, Table2Recv.class, Table2Send.class, "local", "RECEIVED 100 bytes, sum 9900");
    }
}
