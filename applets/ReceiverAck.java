import static unet.sle.Natives.*;

/**
 * Receiver acknowledgment between applets only (the U-Net/SLE paper's
 * Figure 6, second curve): the benchmark's flow control, bursts of 25
 * messages each answered by an acknowledgment, run by the applets; neither
 * user ever sees an acknowledgment. Both ends run this class; each endpoint
 * talks to one peer (the credit is the endpoint's).
 *
 * <p>Packets end with a type byte: a data packet is a user message followed
 * by 'D'; an acknowledgment is the single byte 'A'.
 *
 * <p>Receiving: a data packet's message (the packet without its last byte)
 * is delivered to the user as StdUnet does: inline when at most 56 bytes,
 * otherwise in as many free buffers as it needs (at most 14); when the free
 * queue runs dry the buffers taken are given back and the message is
 * dropped. After every 25th data packet (delivered or not) the applet sends
 * an acknowledgment back on the channel it arrived on. An acknowledgment
 * is taken by the applet and never reaches the user.
 *
 * <p>Sending: the applet starts with a credit of 25 packets; each
 * acknowledgment brings it back to 25. Each user message (at most 256 KiB
 * - 1 bytes) is copied into the applet's backlog, a 256 KiB ring of up to
 * 64 messages (the user may reuse its buffer once doTx returns), and goes
 * out, in order, while credit remains. A send that finds no room in the
 * backlog is dropped and counted in {@code dropped}: the user is not told,
 * as the user is not told of acknowledgments. When the credit stays at zero
 * for 10 ms with messages waiting (a packet or an acknowledgment was lost),
 * the applet assumes the acknowledgment and goes on (counted in
 * {@code recovered}), as the user-level benchmark waits 10 ms for an
 * acknowledgment and goes on.
 *
 * <p>No invocation copies much more than 48 KiB (but always at least one
 * message): the rest continues from a timer due at once, so no invocation
 * runs long enough for the engine to hold the applet back.
 */
public class ReceiverAck {
    public static byte[] RxBuf;

    static final byte DATA = 'D';
    static final byte ACK = 'A';
    static final int WINDOW = 25;
    static final int POOL = 256 * 1024;
    static final int MAXQ = 64;
    static final int QMASK = MAXQ - 1;
    static final int BUDGET = 48 * 1024;
    static final int RECOVER_US = 10000;
    /** Timer argument of a continuation. */
    static final int CONTINUE = 0;
    /** Timer argument of the recovery timer. */
    static final int RECOVER = 1;

    // Sender: the backlog ring, entries qHead .. qTail - 1.
    public static byte[] pool;
    public static int[] qOff;
    public static int[] qLen;
    public static int[] qChan;
    public static int qHead;
    public static int qTail;
    public static int wr;
    public static int credit;
    public static boolean continuing;
    /** Waiting at zero credit with messages backlogged, since armedAt. */
    public static boolean armed;
    public static int armedAt;
    /**
     * A recovery timer is set. At most one is: an acknowledgment disarms
     * without taking it back, and the timer, when it fires, sets itself
     * again for the rest of the wait if the sender was armed anew meanwhile
     * (a sender that renews its credit every few microseconds would
     * otherwise leave a stale 10 ms timer behind each time).
     */
    public static boolean timerSet;
    public static int dropped;
    public static int recovered;
    public static int acks;

    // Receiver: data packets since the last acknowledgment.
    public static int received;
    public static byte[] ack;
    public static int[] offsets;
    public static int buflen;

    ReceiverAck() {
        pool = newAlignedArray(POOL);
        qOff = new int[MAXQ];
        qLen = new int[MAXQ];
        qChan = new int[MAXQ];
        credit = WINDOW;
        ack = newAlignedArray(1);
        ack[0] = ACK;
        offsets = new int[14];
        buflen = getFreeBufferLength();
    }

    /** Where a packet of n bytes goes in the backlog ring, or -1: full. */
    static int place(int n) {
        if (qHead == qTail) {
            return n <= POOL ? 0 : -1;
        }
        if (qTail - qHead >= MAXQ) {
            return -1;
        }
        int rd = qOff[qHead & QMASK];
        // Non-empty: wr != rd, and the free space is what lies from wr up
        // to rd, going round the end of the pool when wr > rd.
        if (wr > rd) {
            if (wr + n <= POOL) {
                return wr;
            }
            return n < rd ? 0 : -1;
        }
        return wr + n < rd ? wr : -1;
    }

    /** Send from the backlog while credit lasts; spent: bytes copied so far. */
    static void pump(int spent) {
        while (credit > 0 && qHead != qTail) {
            int i = qHead & QMASK;
            if (spent > 0 && spent + qLen[i] > BUDGET) {
                if (!continuing) {
                    continuing = true;
                    setTimer(0, CONTINUE);
                }
                return;
            }
            txPush(pool, qOff[i], qChan[i], qLen[i]);
            spent += qLen[i];
            qHead++;
            credit--;
        }
        if (credit == 0 && qHead != qTail && !armed) {
            armed = true;
            armedAt = now();
            if (!timerSet) {
                timerSet = true;
                setTimer(RECOVER_US, RECOVER);
            }
        }
    }

    static int doTx(int length, int channel, int off) {
        int at = place(length + 1);
        if (at < 0) {
            dropped++;
            return 0;
        }
        doHtoLDMA(pool, at, off, length);
        pool[at + length] = DATA;
        int i = qTail & QMASK;
        qOff[i] = at;
        qLen[i] = length + 1;
        qChan[i] = channel;
        qTail++;
        wr = at + length + 1;
        pump(length);
        return 0;
    }

    static void doTimer(int arg) {
        if (arg == CONTINUE) {
            continuing = false;
            pump(0);
        } else if (arg == RECOVER) {
            timerSet = false;
            if (!armed) {
                return;
            }
            // now() counts microseconds modulo 2^31.
            int waited = (now() - armedAt) & 0x7fffffff;
            if (waited < RECOVER_US) {
                timerSet = true;
                setTimer(RECOVER_US - waited, RECOVER);
                return;
            }
            armed = false;
            credit = WINDOW;
            recovered++;
            pump(0);
        }
    }

    /** Deliver RxBuf[0 .. len) to the user, as StdUnet does. */
    static void deliver(int len, int channel) {
        if (len <= 56) {
            dmaRxdPayload(RxBuf, channel, len);
            return;
        }
        int n = (len + buflen - 1) / buflen;
        if (n > 14) {
            return;
        }
        for (int i = 0; i < n; i++) {
            int off = getFreeBuffer();
            if (off == -1) {
                for (int k = i - 1; k >= 0; k--) {
                    putFreeBuffer(offsets[k]);
                }
                return;
            }
            int chunk = len - i * buflen;
            if (chunk > buflen) {
                chunk = buflen;
            }
            doLtoHDMA(RxBuf, i * buflen, off, chunk);
            offsets[i] = off;
        }
        dmaRxd(offsets, channel, len);
    }

    static int doRx(int length, int channel) {
        if (length < 1) {
            return 0;
        }
        byte type = RxBuf[length - 1];
        if (type == ACK && length == 1) {
            acks++;
            credit = WINDOW;
            armed = false;
            pump(0);
        } else if (type == DATA && length > 1) {
            deliver(length - 1, channel);
            received++;
            if (received == WINDOW) {
                received = 0;
                txPush(ack, 0, channel, 1);
            }
        }
        return 0;
    }
}
