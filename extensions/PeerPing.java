import unet.spine.Spine;

/**
 * A SPINE extension for two adapters joined by a peer queue (load it on
 * both): a host on adapter A asks, a handler on A sends to a handler on
 * B over the queue, B's handler answers, and A's hands the answer to the
 * host. No host application is on B's path.
 *
 * <ul>
 * <li>{@code onPing} ({@code base}, on A, from a host): arguments are the
 * peer's destination ({@code DEST_PEER << 24 | index}, 4 bytes) and a
 * payload; sends the host's source and the payload to {@code onPong} on
 * the peer. A refused send is told to the host under {@code base + 3},
 * with the error code.
 * <li>{@code onPong} ({@code base + 1}, on B): answers the message, over
 * the queue it came by, to {@code onBack}.
 * <li>{@code onBack} ({@code base + 2}, on A): sends the payload to the
 * host it names, under {@code base + 2}.
 * <li>{@code onRally} ({@code base + 4}, on A, from a host): arguments are
 * the peer's destination and a number of rounds; plays that many round
 * trips between {@code onVolley} on B and {@code onReturn} on A, then
 * tells the host under {@code base + 6} (arguments: the rounds played).
 * <li>{@code onVolley} ({@code base + 5}, on B) and {@code onReturn}
 * ({@code base + 6}, on A): the two sides of the rally.
 * </ul>
 *
 * <p>{@code init(base)} installs them; {@code base} is 64 or more.
 */
public class PeerPing {
    static byte[] args;
    static int host;
    static int left;
    static int played;

    static void init(int base) {
        args = new byte[Spine.ARGS_MAX];
        Spine.addHandler("onPing", base, base);
        Spine.addHandler("onPong", base + 1, base);
        Spine.addHandler("onBack", base + 2, base);
        Spine.addHandler("onRally", base + 4, base);
        Spine.addHandler("onVolley", base + 5, base);
        Spine.addHandler("onReturn", base + 6, base);
    }

    static void putInt(int off, int v) {
        args[off] = (byte) v;
        args[off + 1] = (byte) (v >> 8);
        args[off + 2] = (byte) (v >> 16);
        args[off + 3] = (byte) (v >> 24);
    }

    /** Tell the host that sent {@code msg} that a send failed with {@code code}. */
    static void refused(int base, int msg, int code) {
        putInt(0, code);
        Spine.reply(msg, base + 3, args, 0, 4);
    }

    static void onPing(int base, int msg) {
        int peer = Spine.argInt(msg, 0);
        putInt(0, Spine.source(msg));
        int n = Spine.readArgs(msg, 4, args, 4, Spine.ARGS_MAX - 4);
        int r = Spine.send(peer, base + 1, args, 0, n + 4);
        if (r < 0) {
            refused(base, msg, r);
        }
    }

    static void onPong(int base, int msg) {
        int n = Spine.readArgs(msg, 0, args, 0, Spine.ARGS_MAX);
        Spine.reply(msg, base + 2, args, 0, n);
    }

    static void onBack(int base, int msg) {
        int dest = Spine.argInt(msg, 0);
        int n = Spine.readArgs(msg, 4, args, 0, Spine.ARGS_MAX);
        Spine.send(dest, base + 2, args, 0, n);
    }

    static void onRally(int base, int msg) {
        int peer = Spine.argInt(msg, 0);
        host = Spine.source(msg);
        left = Spine.argInt(msg, 4);
        played = 0;
        putInt(0, 0);
        int r = Spine.send(peer, base + 5, args, 0, 4);
        if (r < 0) {
            refused(base, msg, r);
        }
    }

    static void onVolley(int base, int msg) {
        int n = Spine.readArgs(msg, 0, args, 0, 4);
        Spine.reply(msg, base + 6, args, 0, n);
    }

    static void onReturn(int base, int msg) {
        played++;
        left--;
        if (left > 0) {
            putInt(0, played);
            if (Spine.reply(msg, base + 5, args, 0, 4) == 0) {
                return;
            }
        }
        putInt(0, played);
        Spine.send(host, base + 6, args, 0, 4);
    }
}
