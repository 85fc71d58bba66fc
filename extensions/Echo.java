import unet.spine.Spine;

/**
 * A small SPINE extension: four active-message handlers.
 *
 * <ul>
 * <li>{@code onEcho} (number {@code base}): answers a message with the same
 * arguments, to its source (a host endpoint's message goes back to it).
 * <li>{@code onForward} (number {@code base + 1}): hands the message to
 * another handler of the adapter ({@code onDeliver}), with its source in
 * front of the arguments: no host on the path between the two handlers.
 * <li>{@code onDeliver} (number {@code base + 2}): sends the arguments
 * after the source it was given to that source, under handler number
 * {@code base + 2}.
 * <li>{@code onBulk} (number {@code base + 3}): answers a bulk message with
 * its buffer, the first byte of which it increments (the runtime's buffer
 * goes back to its source without a copy in the extension).
 * </ul>
 *
 * <p>{@code init(base)} installs them; {@code base} is 64 or more. The
 * arrays are made once, there: handlers do not allocate.
 */
public class Echo {
    static byte[] args;
    static byte[] one;
    static int echoed;

    static void init(int base) {
        args = new byte[Spine.ARGS_MAX];
        one = new byte[1];
        Spine.addHandler("onEcho", base, base);
        Spine.addHandler("onForward", base + 1, base + 2);
        Spine.addHandler("onDeliver", base + 2, base + 2);
        Spine.addHandler("onBulk", base + 3, base + 3);
    }

    static void onEcho(int self, int msg) {
        int n = Spine.readArgs(msg, 0, args, 0, Spine.ARGS_MAX);
        if (Spine.reply(msg, self, args, 0, n) == 0) {
            echoed++;
        }
    }

    static void onForward(int next, int msg) {
        int src = Spine.source(msg);
        args[0] = (byte) src;
        args[1] = (byte) (src >> 8);
        args[2] = (byte) (src >> 16);
        args[3] = (byte) (src >> 24);
        int n = Spine.readArgs(msg, 0, args, 4, Spine.ARGS_MAX - 4);
        Spine.send(Spine.DEST_LOCAL, next, args, 0, n + 4);
    }

    static void onDeliver(int self, int msg) {
        int dest = Spine.argInt(msg, 0);
        int n = Spine.readArgs(msg, 4, args, 0, Spine.ARGS_MAX);
        Spine.send(dest, self, args, 0, n);
    }

    static void onBulk(int self, int msg) {
        int buf = Spine.bulk(msg);
        int n = Spine.readArgs(msg, 0, args, 0, Spine.ARGS_MAX);
        if (buf < 0) {
            Spine.reply(msg, self, args, 0, n);
            return;
        }
        if (Spine.readBuffer(buf, 0, one, 0, 1) == 1) {
            one[0]++;
            Spine.writeBuffer(buf, 0, one, 0, 1);
        }
        Spine.sendBulk(Spine.source(msg), self, args, 0, n, buf);
    }
}
