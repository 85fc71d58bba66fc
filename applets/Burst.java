import static unet.sle.Natives.*;

/**
 * A burst of 25 messages for each transmit request the user posts (the
 * U-Net/SLE paper's Figure 6, third curve).
 *
 * <p>Sending: the user's message is copied into the applet once (one
 * doHtoLDMA). When its first byte is 'B' (the burst mark) it goes out 25
 * times, unchanged; any other message goes out once, so that a user can mix
 * bursts with ordinary messages (acknowledgments, control). One burst at a
 * time: a marked send that arrives while the previous burst is still going
 * out is dropped and counted in {@code dropped}, as is a marked send longer
 * than 64 KiB (the applet's copy); unmarked sends of any length go out at
 * once (while a burst is going out, ahead of its remaining copies).
 * No invocation copies much more than 48 KiB (but always at least one
 * message): the rest of a burst continues from a timer due at once, so no
 * invocation runs long enough for the engine to hold the applet back.
 *
 * <p>Receiving: as StdUnet (inline when at most 56 bytes, otherwise in as
 * many free buffers as needed, at most 14; dropped, buffers given back,
 * when the free queue runs dry). The receiving user sees every copy.
 */
public class Burst {
    public static byte[] RxBuf;

    static final byte MARK = 'B';
    static final int COPIES = 25;
    static final int MAX = 64 * 1024;
    static final int BUDGET = 48 * 1024;

    public static byte[] TxBuf;
    public static byte[] peek;
    /** Copies of the current burst still to send. */
    public static int left;
    public static int burstLen;
    public static int burstChan;
    public static int gen;
    public static int bursts;
    public static int dropped;

    public static int[] offsets;
    public static int buflen;

    Burst() {
        TxBuf = newAlignedArray(MAX);
        peek = newAlignedArray(1);
        offsets = new int[14];
        buflen = getFreeBufferLength();
    }

    /** Send copies of the burst; spent: bytes copied so far this call. */
    static void send(int spent) {
        while (left > 0) {
            if (spent > 0 && spent + burstLen > BUDGET) {
                gen++;
                setTimer(0, gen);
                return;
            }
            txPush(TxBuf, 0, burstChan, burstLen);
            spent += burstLen;
            left--;
        }
    }

    static int doTx(int length, int channel, int off) {
        if (left > 0 || length > MAX) {
            // TxBuf is busy or too small: look at the first byte only.
            doHtoLDMA(peek, 0, off, 1);
            if (peek[0] == MARK) {
                dropped++;
            } else {
                sendUser(channel, length, off);
            }
            return 0;
        }
        doHtoLDMA(TxBuf, 0, off, length);
        if (TxBuf[0] != MARK) {
            txPush(TxBuf, 0, channel, length);
            return 0;
        }
        bursts++;
        burstLen = length;
        burstChan = channel;
        left = COPIES;
        send(length);
        return 0;
    }

    static void doTimer(int arg) {
        if (arg == gen) {
            send(0);
        }
    }

    static int doRx(int length, int channel) {
        if (length <= 56) {
            dmaRxdPayload(RxBuf, channel, length);
            return 0;
        }
        int n = (length + buflen - 1) / buflen;
        if (n > 14) {
            return 0;
        }
        for (int i = 0; i < n; i++) {
            int off = getFreeBuffer();
            if (off == -1) {
                for (int k = i - 1; k >= 0; k--) {
                    putFreeBuffer(offsets[k]);
                }
                return 0;
            }
            int chunk = length - i * buflen;
            if (chunk > buflen) {
                chunk = buflen;
            }
            doLtoHDMA(RxBuf, i * buflen, off, chunk);
            offsets[i] = off;
        }
        dmaRxd(offsets, channel, length);
        return 0;
    }
}
