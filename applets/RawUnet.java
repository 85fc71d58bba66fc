import static unet.sle.Natives.*;

public class RawUnet {
  public static byte[] TxBuf;
  public static byte[] RxBuf;
  public static int freebufferlen;
  public static int[] offsets;

  RawUnet() {
    TxBuf = newAlignedArray(4096);
    freebufferlen = getFreeBufferLength();
    offsets = new int[14];
  }

  private static int doTx(int length, int channel, int off) {
    doHtoLDMA(TxBuf, 0, off, length);
    txPush(TxBuf, 0, channel, length);
    return 0;
  }

  private static int doRx(int length, int channel) {
    if (length <= 56) {
      dmaRxdPayload(RxBuf, channel, length);
    } else {
      int dma_offset = getFreeBuffer();
      if (dma_offset == -1) return 0; /* No buffer available; drop */
      doLtoHDMA(RxBuf, 0, dma_offset, length);
      offsets[0] = dma_offset;
      dmaRxd(offsets, channel, length);
    }
    return 0;
  }
}
