import static unet.sle.Natives.*;

/** A seed for `jive_jit`: the window copies and the sink, with offsets and lengths from the arguments. */
public class JitSeed {
    static byte[] a = new byte[100];
    static byte[] b = new byte[7];

    static int get(int aoff, int woff, int len) {
        wget(a, aoff, woff, len);
        return a[aoff & 63] + len;
    }

    static int put(int aoff, int woff, int len) {
        wput(a, aoff, woff, len);
        return 0;
    }

    static int emitted(int aoff, int x, int len) {
        emit(a, aoff, x, len);
        emit(b, 0, x + 2, 7);
        return x;
    }

    static int mixed(int n) {
        int s = 0;
        for (int i = 0; i < n && i < 40; i++) {
            wget(b, 0, i * 5, 7);
            emit(b, i & 3, i, 3);
            wput(a, i, 200 - i, 9);
            s += b[i % 7];
        }
        return s + sum(a, 0, 100);
    }

    static int nul(int x) {
        byte[] n = null;
        if (x > 0) {
            n = b;
        }
        emit(n, 0, x, 1);
        wget(n, 0, 0, 1);
        return x;
    }
}
