package unet.javia;

/**
 * A peer JVM for the tests: listens on the tag of its first argument with
 * the reliability level of its second, prints {@code LISTENING}, accepts
 * one VI and sends every message back until the VI breaks.
 */
public final class Echo {
    private Echo() {}

    public static void main(String[] args) throws Exception {
        int tag = Integer.parseInt(args[0]);
        ViAttributes attrs = new ViAttributes()
                .setReliability(ViAttributes.Reliability.valueOf(args[1]))
                .setMaxMessageSize(32 * 1024);
        try (ServerVi sv = new ServerVi(tag)) {
            System.out.println("LISTENING");
            System.out.flush();
            try (Vi vi = sv.accept(attrs, Vi.INFINITE)) {
                ViBATicket[] ts = new ViBATicket[32];
                for (int k = 0; k < ts.length; k++) {
                    ts[k] = new ViBATicket(new byte[32 * 1024], 0);
                    vi.recvPost(ts[k]);
                }
                while (true) {
                    ViBATicket t;
                    try {
                        t = vi.recvWait(Vi.INFINITE);
                    } catch (ViException e) {
                        System.out.println("ENDED " + e.viError());
                        return;
                    }
                    vi.send(t.getByteArray(), 0, t.getLength());
                    vi.recvPost(t);
                }
            }
        }
    }
}
