/**
 * Static fields read and written in straight runs of ops, whose compiled
 * code takes a field's value from the run's earlier read or write instead
 * of loading it again; tests/jit_fields.rs compares compiled and
 * interpreted runs of these methods under budgets that stop them at every
 * point: a call, an allocation, natives and a join of paths between the accesses,
 * narrow fields, a volatile field, and loops (unrolled and not) whose every iteration reads
 * the fields afresh.
 */
public class Fields {
    static int g;
    static int h;
    static byte b;
    static short s;
    static boolean z;
    static volatile int v;
    static byte[] buf;

    static void bump() {
        g++;
    }

    /** A read, a call that writes the field, and a read again. */
    static int aroundCall(int n) {
        g = n;
        int a = g;
        bump();
        int c = g;
        return a * 1000 + c;
    }

    /** A write, then reads and writes of two fields in one run. */
    static int writeThenRead(int n) {
        g = n;
        int x = g + g + g;
        h = x;
        g = h + 1;
        return g + h + g;
    }

    /** Narrow fields: a read after a write sees the narrowed value. */
    static int narrow(int n) {
        b = (byte) n;
        s = (short) n;
        z = (n & 1) != 0;
        return b + s + (z ? 1 : 0) + b + s;
    }

    /** A loop that writes the field it reads: each iteration reads it again. */
    static int loop(int n) {
        g = 0;
        int t = 0;
        for (int i = 0; i < n; i++) {
            t += g + g;
            g = g + i;
        }
        return t + g;
    }

    /** Two fields swapped and summed in a small (unrolled) loop. */
    static int twoFields(int n) {
        g = 1;
        h = 2;
        for (int i = 0; i < n; i++) {
            int t = g;
            g = h;
            h = t + g;
        }
        return g ^ h;
    }

    /** A join of two paths that wrote different fields. */
    static int join(int n) {
        g = 5;
        h = 7;
        if (n > 0) {
            g = n;
        } else {
            h = g + n;
        }
        return g + h + g;
    }

    /** A read, an allocation, and reads again. */
    static int aroundAlloc(int n) {
        g = n;
        int a = g;
        int[] x = new int[(n & 7) + 1];
        x[0] = g;
        return a + x[0] + g + x.length;
    }

    /**
     * Fields passed to natives and read around them: a native writes the
     * array's elements (fill), never a field, so the values read before it
     * hold after it, and the array's bytes are read again.
     */
    static int aroundNatives(int n) {
        buf = new byte[16];
        g = n;
        unet.sle.Natives.fill(buf, n, n & 15);
        int a = unet.sle.Natives.sum(buf, 0, n & 15) + g;
        g = unet.sle.Natives.id(g) + 1;
        return a + g + unet.sle.Natives.sum(buf, 1, 3) + buf.length;
    }

    /** Ten reads of a field the loop's body writes, through fused adds. */
    static int tenfold(int n) {
        g = 3;
        for (int i = 0; i < n; i++) {
            g = g + g + g + g + g + g + g + g + g + g + i;
        }
        return g;
    }

    /** A volatile field among plain ones: each of its reads is a load. */
    static int volatileReads(int n) {
        v = n;
        g = v + v;
        int a = g + v;
        for (int i = 0; i < n && v == n; i++) {
            a += g + v;
        }
        return a;
    }
}
