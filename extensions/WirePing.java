import unet.spine.Spine;

/**
 * SPINE over the wire: a host's ping goes from a handler on one adapter
 * to a handler on another over a link (UDP), and the answer comes back
 * the same way, with no host application on the remote adapter's path.
 * Load it on both adapters with the same {@code base}.
 *
 * <ul>
 * <li>{@code onPing} (number {@code base}): a host's message
 * {@code [link: int LE][payload]} (and bulk data, if any): sends the
 * payload (and the data) to handler {@code base + 1} over the link; if
 * the send is refused, answers the host under {@code base + 3} with the
 * error code (4 bytes LE).
 * <li>{@code onRemote} (number {@code base + 1}): answers over the link
 * the message came from, under {@code base + 2}, with its arguments (and
 * its data).
 * <li>{@code onPong} (number {@code base + 2}): hands the answer to the
 * host whose ping went out last, under {@code base + 2}.
 * </ul>
 */
public class WirePing {
    static byte[] args;
    static int host;

    static void init(int base) {
        args = new byte[Spine.ARGS_MAX];
        Spine.addHandler("onPing", base, base + 1);
        Spine.addHandler("onRemote", base + 1, base + 2);
        Spine.addHandler("onPong", base + 2, base + 2);
    }

    static void onPing(int next, int msg) {
        host = Spine.source(msg);
        int link = Spine.argInt(msg, 0);
        int n = Spine.readArgs(msg, 4, args, 0, Spine.ARGS_MAX);
        int buf = Spine.bulk(msg);
        int dest = (Spine.DEST_WIRE << 24) | link;
        int r;
        if (buf < 0) {
            r = Spine.send(dest, next, args, 0, n);
        } else {
            r = Spine.sendBulk(dest, next, args, 0, n, buf);
        }
        if (r != 0) {
            args[0] = (byte) r;
            args[1] = (byte) (r >> 8);
            args[2] = (byte) (r >> 16);
            args[3] = (byte) (r >> 24);
            Spine.send(host, next + 2, args, 0, 4);
        }
    }

    static void onRemote(int next, int msg) {
        int n = Spine.readArgs(msg, 0, args, 0, Spine.ARGS_MAX);
        int buf = Spine.bulk(msg);
        if (buf < 0) {
            Spine.reply(msg, next, args, 0, n);
        } else {
            Spine.sendBulk(Spine.source(msg), next, args, 0, n, buf);
        }
    }

    static void onPong(int self, int msg) {
        int n = Spine.readArgs(msg, 0, args, 0, Spine.ARGS_MAX);
        int buf = Spine.bulk(msg);
        if (buf < 0) {
            Spine.send(host, self, args, 0, n);
        } else {
            Spine.sendBulk(host, self, args, 0, n, buf);
        }
    }
}
