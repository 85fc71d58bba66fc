import static unet.sle.Natives.*;

/**
 * A seed for `jive_jit`: byte arrays the host lends bytes to (set by the
 * host, as an applet's RxBuf is, and passed by the class only to natives,
 * from one method each), beside one it reads itself. The fuzz target runs
 * each method with bytes lent to the first and with the same bytes copied
 * in, compiled and interpreted.
 */
public class Lend {
    static byte[] rx;
    static byte[] rx2;
    static byte[] own;
    static int n;

    static int rx(int aoff, int woff, int len) {
        wput(rx, aoff, woff, len);
        emit(rx, aoff, 5, len);
        emit(rx, aoff + 1, n * 2 + 1, len - 1);
        wget(rx, 0, woff, 3);
        emit(rx, 0, 6, 8);
        return len;
    }

    static int rx2(int aoff, int woff, int len) {
        for (int i = 0; i < 3; i++) {
            wput(rx2, aoff + i, woff + i * 16, len);
        }
        return 0;
    }

    static int mine(int aoff, int woff, int len) {
        if (own == null) {
            own = new byte[64];
        }
        wput(own, aoff, woff, len);
        return own[aoff & 63];
    }
}
