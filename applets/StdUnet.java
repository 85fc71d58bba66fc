import static unet.sle.Natives.*;

/**
 * The standard U-Net behaviour as a U-Net/SLE applet: sends go out
 * unchanged; an arrival of at most 56 bytes is delivered inline in its
 * receive descriptor, a longer one in as many free buffers as it needs (at
 * most 14), like the engine does for an endpoint without an applet. When the
 * free queue runs dry the buffers already taken are given back and the
 * message is dropped.
 */
public class StdUnet {
    public static byte[] RxBuf;
    public static int[] offsets;
    public static int buflen;
    /** Messages dropped for want of free buffers or because too long. */
    public static int dropped;

    StdUnet() {
        offsets = new int[14];
        buflen = getFreeBufferLength();
    }

    static int doTx(int length, int channel, int off) {
        sendUser(channel, length, off);
        return 0;
    }

    static int doRx(int length, int channel) {
        if (length <= 56) {
            dmaRxdPayload(RxBuf, channel, length);
            return 0;
        }
        int n = (length + buflen - 1) / buflen;
        if (n > 14) {
            dropped++;
            return 0;
        }
        for (int i = 0; i < n; i++) {
            int off = getFreeBuffer();
            if (off == -1) {
                /* Out of buffers: give back those taken, drop. */
                for (int k = i - 1; k >= 0; k--) {
                    putFreeBuffer(offsets[k]);
                }
                dropped++;
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
