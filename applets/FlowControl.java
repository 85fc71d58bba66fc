import static unet.sle.Natives.*;

/**
 * Token-based flow control with retransmission (the U-Net/SLE paper's
 * section 5.1), giving the application reliable, in-order delivery over a
 * lossy wire. Both ends run this class; each endpoint talks to one peer.
 *
 * <p>Packets carry a 5-byte header: a type byte (1 data, 2 acknowledgement)
 * and a big-endian sequence number. A data packet carries one user message
 * after the header; an acknowledgement carries the next sequence number
 * its sender expects (everything before it has been delivered).
 *
 * <p>Sending: each user message (1..1024 bytes) gets the next sequence
 * number and is copied into the applet's pool of 80 packet slots. Up to 16
 * unacknowledged packets (the window, or tokens) are on the wire at a time;
 * the rest of the pool is the backlog, sent as acknowledgements return
 * tokens. A send finding the pool full, longer than 1024 bytes or on a
 * second channel is dropped and counted in {@code dropped}. When no
 * acknowledgement advances the window for 20 ms, every unacknowledged packet
 * is sent again (go-back-N).
 *
 * <p>Receiving: only the next expected sequence number is delivered to the
 * user (inline when at most 56 bytes, otherwise in free buffers); every data
 * packet, including duplicates and out-of-order ones (which are dropped), is
 * answered with a cumulative acknowledgement. A message that finds no free
 * buffer is not acknowledged and comes again.
 */
public class FlowControl {
    public static byte[] RxBuf;

    static final byte DATA = 1;
    static final byte ACK = 2;
    static final int HDR = 5;
    static final int WINDOW = 16;
    static final int POOL = 80;
    static final int MAXMSG = 1024;
    static final int SLOT = HDR + MAXMSG;
    static final int TIMEOUT_US = 20000;

    // Sender: acknowledged < base <= on the wire < next <= queued < tail.
    public static byte[] pool;
    public static int[] poolLen;
    public static int base;
    public static int next;
    public static int tail;
    public static int chan;
    public static int gen;
    public static int dropped;
    public static int retransmitted;

    // Receiver.
    public static int expected;
    public static byte[] ack;
    public static byte[] small;
    public static int[] offsets;
    public static int buflen;

    FlowControl() {
        pool = newAlignedArray(POOL * SLOT);
        poolLen = new int[POOL];
        chan = -1;
        ack = newAlignedArray(HDR);
        small = newAlignedArray(56);
        offsets = new int[14];
        buflen = getFreeBufferLength();
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

    /** Restart the retransmission timer: only the newest timer counts. */
    static void arm() {
        gen++;
        setTimer(TIMEOUT_US, gen);
    }

    static void transmit(int seq) {
        int slot = seq % POOL;
        txPush(pool, slot * SLOT, chan, poolLen[slot]);
    }

    /** Put queued packets on the wire while tokens remain. */
    static void pump() {
        boolean idle = base == next;
        while (next != tail && next - base < WINDOW) {
            transmit(next);
            next++;
        }
        if (idle && base != next) {
            arm();
        }
    }

    static int doTx(int length, int channel, int off) {
        if (length > MAXMSG || tail - base >= POOL || (chan != -1 && channel != chan)) {
            dropped++;
            return 0;
        }
        chan = channel;
        int at = (tail % POOL) * SLOT;
        pool[at] = DATA;
        putInt(pool, at + 1, tail);
        doHtoLDMA(pool, at + HDR, off, length);
        poolLen[tail % POOL] = HDR + length;
        tail++;
        pump();
        return 0;
    }

    static void doTimer(int arg) {
        if (arg != gen || base == next) {
            return;
        }
        for (int s = base; s != next; s++) {
            transmit(s);
            retransmitted++;
        }
        arm();
    }

    static void acknowledged(int upto) {
        if (upto - base <= 0 || next - upto < 0) {
            return;
        }
        base = upto;
        if (base != next) {
            arm();
        } else {
            gen++;
        }
        pump();
    }

    /** Deliver the payload of the data packet in RxBuf; false if no buffer. */
    static boolean deliver(int len, int channel) {
        if (len <= 56) {
            for (int i = 0; i < len; i++) {
                small[i] = RxBuf[HDR + i];
            }
            dmaRxdPayload(small, channel, len);
            return true;
        }
        int n = (len + buflen - 1) / buflen;
        for (int i = 0; i < n; i++) {
            int off = getFreeBuffer();
            if (off == -1) {
                for (int k = i - 1; k >= 0; k--) {
                    putFreeBuffer(offsets[k]);
                }
                return false;
            }
            int chunk = len - i * buflen;
            if (chunk > buflen) {
                chunk = buflen;
            }
            doLtoHDMA(RxBuf, HDR + i * buflen, off, chunk);
            offsets[i] = off;
        }
        dmaRxd(offsets, channel, len);
        return true;
    }

    static int doRx(int length, int channel) {
        if (length < HDR) {
            return 0;
        }
        int seq = getInt(RxBuf, 1);
        if (RxBuf[0] == ACK) {
            acknowledged(seq);
            return 0;
        }
        if (RxBuf[0] != DATA) {
            return 0;
        }
        if (seq == expected && deliver(length - HDR, channel)) {
            expected++;
        }
        ack[0] = ACK;
        putInt(ack, 1, expected);
        txPush(ack, 0, channel, HDR);
        return 0;
    }
}
