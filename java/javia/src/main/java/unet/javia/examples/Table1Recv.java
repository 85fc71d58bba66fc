package unet.javia.examples;

import unet.javia.ServerVi;
import unet.javia.Vi;
import unet.javia.ViBATicket;
import unet.javia.ViException;

/**
 * The receive side of the paper's Table 1 (Javia-I), as printed there
 * (the paper's {@code Byte[]} is a misprint of {@code byte[]}). Prints
 * {@code LISTENING} once it waits, then the length and a checksum of the
 * message.
 */
public final class Table1Recv {
    private Table1Recv() {}

    /**
     * Accept a VI on tag 123 and receive one message.
     *
     * @param args unused
     * @throws ViException when VIA fails
     */
    public static void main(String[] args) throws ViException {
        ServerVi sv = new ServerVi(123);
        System.out.println("LISTENING");
        System.out.flush();
        byte[] b = new byte[100];
        Vi vi = sv.accept();
        ViBATicket t = new ViBATicket(b, 0);
        vi.recvPost(t);
        t = vi.recvWait(Vi.INFINITE);
        b = t.getByteArray();
        /* read b */
        long sum = 0;
        for (int i = 0; i < t.getLength(); i++) {
            sum += b[i] & 0xff;
        }
        System.out.println("RECEIVED " + t.getLength() + " bytes, sum " + sum);
        vi.close();
        sv.close();
    }
}
