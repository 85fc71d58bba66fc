import static unet.sle.Natives.*;

/**
 * Applet-to-applet ping-pong (the fastest curve of the U-Net/SLE paper's
 * Figure 5): round trips that never reach user level.
 *
 * <p>The user's send starts a run: its first 4 bytes are N, the number of
 * round trips (big-endian), the rest is the payload that travels. The
 * applet sends a ping of {@code 1 + length} bytes: a type byte ('P') and the
 * user's message. The peer's applet (the same class) answers each ping at
 * once from RxBuf as a pong ('Q'); the initiator's applet answers each pong
 * with the next ping, from RxBuf too. After N round trips the initiator's
 * applet delivers one 12-byte report to its user, inline: N, the
 * microseconds the run took by the applet's clock, and the number of pongs
 * whose length differed from the ping's (all big-endian ints).
 *
 * <p>Sends shorter than 4 bytes, or with N below 1, and arrivals of any
 * other type are ignored; a run started while one is under way replaces it.
 */
public class PingPong {
    public static byte[] RxBuf;
    public static byte[] TxBuf;
    public static byte[] report;
    public static int rounds;
    public static int done;
    public static int started;
    public static int pingLength;
    public static int bad;

    static final byte PING = 'P';
    static final byte PONG = 'Q';
    static final int MAX = 8192;

    PingPong() {
        TxBuf = newAlignedArray(MAX);
        report = newAlignedArray(12);
    }

    static int getInt(byte[] a, int off) {
        return ((a[off] & 0xff) << 24) | ((a[off + 1] & 0xff) << 16)
                | ((a[off + 2] & 0xff) << 8) | (a[off + 3] & 0xff);
    }

    static void putInt(byte[] a, int off, int v) {
        a[off] = (byte) (v >> 24);
        a[off + 1] = (byte) (v >> 16);
        a[off + 2] = (byte) (v >> 8);
        a[off + 3] = (byte) v;
    }

    static int doTx(int length, int channel, int off) {
        if (length < 4 || length + 1 > MAX) {
            return 0;
        }
        doHtoLDMA(TxBuf, 1, off, length);
        int n = getInt(TxBuf, 1);
        if (n < 1) {
            return 0;
        }
        rounds = n;
        done = 0;
        bad = 0;
        started = now();
        pingLength = length + 1;
        TxBuf[0] = PING;
        txPush(TxBuf, 0, channel, pingLength);
        return 0;
    }

    static int doRx(int length, int channel) {
        if (length < 1) {
            return 0;
        }
        if (RxBuf[0] == PING) {
            RxBuf[0] = PONG;
            txPush(RxBuf, 0, channel, length);
        } else if (RxBuf[0] == PONG && done < rounds) {
            if (length != pingLength) {
                bad++;
            }
            done++;
            if (done < rounds) {
                RxBuf[0] = PING;
                txPush(RxBuf, 0, channel, length);
            } else {
                putInt(report, 0, done);
                putInt(report, 4, now() - started);
                putInt(report, 8, bad);
                dmaRxdPayload(report, channel, 12);
            }
        }
        return 0;
    }
}
