package unet.javia.examples;

import java.io.IOException;
import java.nio.ByteBuffer;
import unet.javia.ServerVi;
import unet.javia.Vi;
import unet.javia.ViAttributes;
import unet.javia.ViBuffer;
import unet.javia.ViBufferTicket;

/**
 * The receive side of the paper's Table 2 (Javia-II), as printed there but
 * for the typed view (and {@code attr}, which the paper leaves undeclared).
 * Prints {@code LISTENING}, then the length and a checksum of the message.
 */
public final class Table2Recv {
    private Table2Recv() {}

    /**
     * Accept a VI on tag 123 and receive one message into a registered buffer.
     *
     * @param args unused
     * @throws IOException when VIA fails
     */
    public static void main(String[] args) throws IOException {
        ViAttributes attr = new ViAttributes();
        ServerVi sv = new ServerVi(123);
        System.out.println("LISTENING");
        System.out.flush();
        ViBuffer vb = new ViBuffer(100);
        ByteBuffer b = vb.toByteArray();
        Vi vi = sv.accept();
        ViBufferTicket t =
                   vb.register(vi, attr);
        vi.recvBufPost(t, 0);
        t = vi.recvBufWait(Vi.INFINITE);
        /* read b */
        long sum = 0;
        for (int i = 0; i < t.getLength(); i++) {
            sum += b.get(i) & 0xff;
        }
        System.out.println("RECEIVED " + t.getLength() + " bytes, sum " + sum);
        vb.unregister(t);
        vi.close();
        sv.close();
    }
}
