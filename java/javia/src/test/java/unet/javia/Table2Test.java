package unet.javia;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import unet.javia.examples.Table2Recv;
import unet.javia.examples.Table2Send;

/** The paper's Table 2 programs, as shipped, between two JVMs on this host. */
class Table2Test {
    @BeforeAll
    static void engine() throws Exception {
        TestEngine.ensure();
    }

    @Test
    void table2SendAndRecvRunBetweenTwoJvms() throws Exception {
        Process recv = TestEngine.jvm(Table2Recv.class);
        try {
            assertEquals("LISTENING", TestEngine.line(recv));
            Process send = TestEngine.jvm(Table2Send.class, "local");
            assertTrue(send.waitFor(60, TimeUnit.SECONDS), "the sender finishes");
            assertEquals(0, send.exitValue(), "the sender succeeds");
            // 2 * (0 + 1 + ... + 99)
            assertEquals("RECEIVED 100 bytes, sum 9900", TestEngine.line(recv));
            assertTrue(recv.waitFor(60, TimeUnit.SECONDS), "the receiver finishes");
            assertEquals(0, recv.exitValue(), "the receiver succeeds");
        } finally {
            recv.destroyForcibly();
        }
    }
}
