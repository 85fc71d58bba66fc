import unet.spine.Spine;

/**
 * A two-port bridge on a SPINE adapter: every frame that comes in on one
 * raw-frame port goes out of the other, untouched, with no host
 * application on the path. The two ports are the adapter's first two
 * (ids 0 and 1: a port's partner is its id with the lowest bit flipped),
 * both opened for this extension's handler.
 *
 * <ul>
 * <li>{@code onFrame} (number {@code base}): sends the frame's buffer
 * (the message's bulk data) out of the other port; counts the frames
 * bridged and those the runtime refused.
 * </ul>
 */
public class PortBridge {
    static byte[] none;
    static int bridged;
    static int refused;

    static void init(int base) {
        none = new byte[0];
        Spine.addHandler("onFrame", base, 0);
    }

    static void onFrame(int unused, int msg) {
        int port = Spine.source(msg) & 0xFFFFFF;
        int out = (Spine.DEST_PORT << 24) | (port ^ 1);
        if (Spine.sendBulk(out, 0, none, 0, 0, Spine.bulk(msg)) == 0) {
            bridged++;
        } else {
            refused++;
        }
    }
}
