import unet.spine.Spine;

/**
 * Writes bulk data into a framebuffer: {@code onWrite} ({@code base}) takes
 * {@code [fb, fbOffset]} and a bulk message, copies the whole bulk buffer
 * to that offset of framebuffer {@code fb} ({@code Spine.fbWrite}) and
 * answers the result as a little-endian int (0, or {@code E_RANGE} for a
 * range outside the framebuffer). The framebuffer tests use it to paint
 * known images.
 */
public class FbWrite {
    static byte[] out;

    static void init(int base) {
        out = new byte[4];
        Spine.addHandler("onWrite", base, base);
    }

    static void onWrite(int self, int msg) {
        int buf = Spine.bulk(msg);
        int r = Spine.fbWrite(Spine.argInt(msg, 0), Spine.argInt(msg, 4), buf, 0,
                Spine.bufferLength(buf));
        out[0] = (byte) r;
        out[1] = (byte) (r >> 8);
        out[2] = (byte) (r >> 16);
        out[3] = (byte) (r >> 24);
        Spine.reply(msg, self, out, 0, 4);
    }
}
