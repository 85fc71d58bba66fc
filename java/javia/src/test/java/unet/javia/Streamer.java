package unet.javia;

/**
 * A peer JVM for the tests: connects to the tag in its first argument and
 * sends 1 KiB messages until it is killed, after printing {@code STREAMING}.
 */
public final class Streamer {
    private Streamer() {}

    public static void main(String[] args) throws Exception {
        int tag = Integer.parseInt(args[0]);
        try (Vi vi = new Vi(ViAddress.LOCAL, new ViAttributes(), null, null, tag)) {
            System.out.println("STREAMING");
            System.out.flush();
            byte[] m = new byte[1024];
            for (long i = 0;; i++) {
                m[0] = (byte) i;
                vi.send(m, 0, m.length);
            }
        }
    }
}
