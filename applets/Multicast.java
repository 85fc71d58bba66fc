import static unet.sle.Natives.*;

/**
 * One send, several destinations (the multicast example of the U-Net/SLE
 * paper's section 1): the first 4 bytes of the user's message are a
 * big-endian bitmask of channels 0..31; the rest of the message is
 * transmitted on every channel whose bit is set, without the user sending
 * it more than once. Messages of at most 4 bytes send nothing; a set bit
 * naming a channel the endpoint does not hold faults the send (the
 * channels before it have been served).
 *
 * <p>Arrivals are delivered as standard U-Net does for messages up to one
 * receive buffer (inline when at most 56 bytes); longer ones are dropped.
 */
public class Multicast {
    public static byte[] RxBuf;
    public static byte[] TxBuf;
    public static int[] offsets;
    public static int buflen;
    public static int dropped;

    static final int MAX = 65536;

    Multicast() {
        TxBuf = newAlignedArray(MAX);
        offsets = new int[14];
        buflen = getFreeBufferLength();
    }

    static int doTx(int length, int channel, int off) {
        if (length <= 4 || length > MAX) {
            return 0;
        }
        doHtoLDMA(TxBuf, 0, off, length);
        int mask = ((TxBuf[0] & 0xff) << 24) | ((TxBuf[1] & 0xff) << 16)
                | ((TxBuf[2] & 0xff) << 8) | (TxBuf[3] & 0xff);
        for (int c = 0; c < 32; c++) {
            if ((mask & (1 << c)) != 0) {
                txPush(TxBuf, 4, c, length - 4);
            }
        }
        return 0;
    }

    static int doRx(int length, int channel) {
        if (length <= 56) {
            dmaRxdPayload(RxBuf, channel, length);
            return 0;
        }
        int off = getFreeBuffer();
        if (off == -1 || length > buflen) {
            if (off != -1) {
                putFreeBuffer(off);
            }
            dropped++;
            return 0;
        }
        doLtoHDMA(RxBuf, 0, off, length);
        offsets[0] = off;
        dmaRxd(offsets, channel, length);
        return 0;
    }
}
