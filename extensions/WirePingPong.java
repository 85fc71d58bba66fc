import unet.spine.Spine;

/**
 * A ball bounced between handlers on two adapters over the UDP wire,
 * with no host application on the path (what {@code unet bench
 * spine-wire} times). Load it on both adapters with the same
 * {@code base}.
 *
 * <ul>
 * <li>{@code onServe} (number {@code base}): a host's message
 * {@code [link: int LE][count: int LE][payload]} (and bulk data, if any):
 * sends {@code [count][payload]} (and the data) over the link to
 * {@code base + 1}.
 * <li>{@code onBall} (number {@code base + 1}): a ball with count 0 goes
 * to the host that served it, under {@code base + 2}; any other goes back
 * to where it came from with its count one less. A count of
 * {@code 2n - 1} makes {@code n} round trips between the adapters.
 * </ul>
 */
public class WirePingPong {
    static byte[] args;
    static int host;

    static void init(int base) {
        args = new byte[Spine.ARGS_MAX];
        Spine.addHandler("onServe", base, base + 1);
        Spine.addHandler("onBall", base + 1, base + 2);
    }

    static void onServe(int ball, int msg) {
        host = Spine.source(msg);
        int link = Spine.argInt(msg, 0);
        int n = Spine.readArgs(msg, 4, args, 0, Spine.ARGS_MAX);
        int buf = Spine.bulk(msg);
        int dest = (Spine.DEST_WIRE << 24) | link;
        if (buf < 0) {
            Spine.send(dest, ball, args, 0, n);
        } else {
            Spine.sendBulk(dest, ball, args, 0, n, buf);
        }
    }

    static void onBall(int done, int msg) {
        int n = Spine.readArgs(msg, 0, args, 0, Spine.ARGS_MAX);
        int count = Spine.argInt(msg, 0);
        int buf = Spine.bulk(msg);
        int dest;
        int handler;
        if (count == 0) {
            dest = host;
            handler = done;
        } else {
            count--;
            args[0] = (byte) count;
            args[1] = (byte) (count >> 8);
            args[2] = (byte) (count >> 16);
            args[3] = (byte) (count >> 24);
            dest = Spine.source(msg);
            handler = done - 1;
        }
        if (buf < 0) {
            Spine.send(dest, handler, args, 0, n);
        } else {
            Spine.sendBulk(dest, handler, args, 0, n, buf);
        }
    }
}
