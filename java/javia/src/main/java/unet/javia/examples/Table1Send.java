package unet.javia.examples;

import unet.javia.Vi;
import unet.javia.ViAddress;
import unet.javia.ViAttributes;
import unet.javia.ViException;

/**
 * The send side of the paper's Table 1 (Javia-I), as printed there.
 * Arguments: the machine ({@code local} or an engine's HOST:PORT).
 */
public final class Table1Send {
    private Table1Send() {}

    /**
     * Connect to tag 123 and send 100 bytes.
     *
     * @param args the machine
     * @throws ViException when VIA fails
     */
    public static void main(String[] args) throws ViException {
        ViAddress addr = new ViAddress(args.length > 0 ? args[0] : "local");
        ViAttributes attr = new ViAttributes();
        Vi vi = new Vi(addr, attr, null,
                       null, 123);
        byte[] b = new byte[100];
        for (int i = 0; i < b.length; i++) {
            b[i] = (byte) i;
        }
        /* send b */
        vi.send(b, 0, 100);
        vi.close();
    }
}
