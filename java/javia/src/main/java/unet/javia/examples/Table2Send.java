package unet.javia.examples;

import java.io.IOException;
import java.nio.ByteBuffer;
import unet.javia.Vi;
import unet.javia.ViAddress;
import unet.javia.ViAttributes;
import unet.javia.ViBuffer;
import unet.javia.ViBufferTicket;

/**
 * The send side of the paper's Table 2 (Javia-II), as printed there but
 * for the typed view: {@code toByteArray()} is a {@link ByteBuffer} over the
 * buffer's memory. Arguments: the machine ({@code local} or HOST:PORT).
 */
public final class Table2Send {
    private Table2Send() {}

    /**
     * Connect to tag 123 and send 100 bytes from a registered buffer.
     *
     * @param args the machine
     * @throws IOException when VIA fails
     */
    public static void main(String[] args) throws IOException {
        ViAddress addr = new ViAddress(args.length > 0 ? args[0] : "local");
        ViAttributes attr = new ViAttributes();
        Vi vi = new Vi(addr, attr, null,
                       null, 123);
        ViBuffer vb = new ViBuffer(100);
        ViBufferTicket t =
                  vb.register(vi, attr);
        ByteBuffer b = vb.toByteArray();
        /* write to b here */
        for (int i = 0; i < 100; i++) {
            b.put(i, (byte) (2 * i));
        }
        vi.sendBufPost(t, 0, 100);
        t = vi.sendBufWait(Vi.INFINITE);
        vb.unregister(t);
        vi.close();
    }
}
