import static unet.sle.Natives.*;

/**
 * Packet-specified receive buffers (the U-Net/SLE paper's section 1): the
 * first 4 bytes of a packet name, big-endian, the offset in the receiver's
 * buffer area where its payload (the rest) belongs. The receiver's applet
 * copies the payload straight there and pushes a receive descriptor naming
 * that offset (and, for a payload longer than one buffer, the buffers that
 * follow it contiguously): the application finds the data in place, with no
 * further copy and no free buffer used. The sender is trusted to name
 * sensible offsets; an offset whose buffers do not lie within the buffer
 * area faults that arrival, and nothing is delivered.
 *
 * <p>Sends go out unchanged: the user writes the offset and the payload.
 * Packets of at most 4 bytes are ignored.
 */
public class PacketBuffers {
    public static byte[] RxBuf;
    public static int[] offsets;
    public static int buflen;

    PacketBuffers() {
        offsets = new int[14];
        buflen = getFreeBufferLength();
    }

    static int doTx(int length, int channel, int off) {
        sendUser(channel, length, off);
        return 0;
    }

    static int doRx(int length, int channel) {
        if (length <= 4) {
            return 0;
        }
        int dst = ((RxBuf[0] & 0xff) << 24) | ((RxBuf[1] & 0xff) << 16)
                | ((RxBuf[2] & 0xff) << 8) | (RxBuf[3] & 0xff);
        int len = length - 4;
        doLtoHDMA(RxBuf, 4, dst, len);
        int n = (len + buflen - 1) / buflen;
        for (int i = 0; i < n && i < 14; i++) {
            offsets[i] = dst + i * buflen;
        }
        dmaRxd(offsets, channel, len);
        return 0;
    }
}
