/**
 * Array references held in locals across loops, allocations, calls and
 * reassignments, whose compiled and interpreted runs tests/jit_arrays.rs
 * compares (the compiler resolves such a reference once, not at each access).
 */
public class ArrCache {
    static int[] ia = new int[16];
    static int[] ib = new int[7];
    static byte[] ba = new byte[9];
    static boolean[] za = new boolean[5];
    static short[] sa = new short[6];
    static int[] keep;
    static int[] empty = new int[0];

    /** The first n ints of ia (k == 0) or ib: past the end at the iaload inside the loop. */
    static int sum(int n, int k) {
        int[] a = k == 0 ? ia : ib;
        int s = 0;
        for (int i = 0; i < n; i++) {
            s += a[i];
        }
        return s;
    }

    /** Stores into ia inside a loop (past its end at the iastore), then reads it back. */
    static int fill(int n, int v) {
        int[] a = ia;
        for (int i = 0; i < n; i++) {
            a[i] = v + i;
        }
        int s = 0;
        for (int i = 0; i < a.length; i++) {
            s += a[i];
        }
        return s;
    }

    /** A local reassigned to another array at i == k, then to null at i == k + 5, inside the loop. */
    static int swap(int n, int k) {
        int[] a = ia;
        int s = 0;
        for (int i = 0; i < n; i++) {
            s += a[i % a.length] + a.length;
            if (i == k) {
                a = ib;
            }
            if (i == k + 5) {
                a = null;
            }
        }
        return s;
    }

    /** Two locals swapped every iteration. */
    static int pingpong(int n) {
        int[] a = ia;
        int[] b = ib;
        int s = 0;
        for (int i = 0; i < n; i++) {
            a[i % a.length] = b[i % b.length] + i;
            int[] t = a;
            a = b;
            b = t;
            s += a.length;
        }
        return s + a[1] + b[1];
    }

    /** An allocation in the loop (the heap's table grows, and collects at the quota) while a is read and written. */
    static int moved(int n, int k) {
        int[] a = new int[8];
        int s = 0;
        for (int i = 0; i < n; i++) {
            a[i & 7] += i;
            int[] t = new int[k];
            t[0] = a[i & 7];
            s += t[0] + a.length + a[(i + 1) & 7];
            if ((i & 3) == 0) {
                keep = t;
            }
        }
        return s + a[3];
    }

    static int[] make(int k) {
        return new int[k];
    }

    static int peek(int[] x, int i) {
        return x[i];
    }

    /** Calls in the loop: one that reads an array, one that allocates; a stays in its local. */
    static int calls(int n, int k) {
        int[] a = ia;
        int s = 0;
        for (int i = 0; i < n; i++) {
            s += peek(a, i & 15) + a[(i + 3) & 15];
            int[] t = make(k);
            s += t.length + a[i & 15];
            a[i & 15] = s;
        }
        return s;
    }

    /** byte[], boolean[] and short[] through locals in a loop. */
    static int kinds(int n) {
        byte[] b = ba;
        boolean[] z = za;
        short[] h = sa;
        int s = 0;
        for (int i = 0; i < n; i++) {
            b[i % 9] = (byte) (i * 37);
            z[i % 5] = (i & 1) == 0;
            h[i % 6] = (short) (i * 1001);
            s += b[(i + 4) % 9] + (z[(i + 2) % 5] ? 1 : 0) + h[(i + 1) % 6];
        }
        return s + b.length + z.length + h.length;
    }

    /** Nested loops over ib, the array used in the inner one only: past its end at the inner load when m > 7. */
    static int nested(int n, int m) {
        int[] a = ib;
        int s = 0;
        for (int r = 0; r < n; r++) {
            for (int i = 0; i < m; i++) {
                a[i] = a[i] + r;
                s += a[i];
            }
        }
        return s;
    }

    /** arraylength of null inside the loop when n <= 3. */
    static int nul(int n) {
        int[] a = n > 3 ? ia : null;
        int s = 0;
        for (int i = 0; i < n; i++) {
            s += a.length;
        }
        return s;
    }

    /** Arrays of every kind through the same operand-stack slots, a boolean[] read and written. */
    static int mixed(int n) {
        int s = 0;
        for (int i = 0; i < n; i++) {
            s += ia[i & 15] + ba[i % 9] + sa[i % 6] + (za[i % 5] ? 1 : 0);
            za[i % 5] = !za[(i + 1) % 5];
            ba[i % 9] = (byte) s;
        }
        return s + ia.length + ba.length;
    }

    /** arraylength of an empty array (n > 5) or of ib, and of a byte[], in a loop. */
    static int lens(int n) {
        int[] e = n > 5 ? empty : ib;
        byte[] b = ba;
        int s = 0;
        for (int i = 0; i < n; i++) {
            s += e.length + b.length;
        }
        return s;
    }

    /** Constant indices, several at each (ib when n > 100, ia, empty when n == 1, else null): past ib's end at a[9]. */
    static int consts(int n) {
        int[] a = n > 100 ? ib : n > 1 ? ia : n == 1 ? empty : null;
        int s = a[0] + a[0] + a[1] + a[0];
        a[1] = s;
        s += a[1] + a[0] + a[9];
        return s + a[1] + a[9];
    }

    /** The same constant index read through one local before and after it is pointed at another array (ia, then ib). */
    static int repoint(int n) {
        int[] a = ia;
        a[2] = n;
        int s = a[2] + a[2];
        a = ib;
        s += a[2] + a[2];
        a = n > 3 ? ia : ib;
        return s + a[2];
    }

    /**
     * Sums of a local with itself, which javac's iadd chains and the
     * decoder's fused three- and four-term additions carry: compiled as
     * multiplications, they wrap as the additions do.
     */
    static int selfSums(int x) {
        int y = x;
        int s = y + y + y + y + y + y + y + y + y + y;
        int t = y + y + y;
        return s + t + (s + x) + (x + t + 1);
    }

    /**
     * Sums of one value with itself (an element read ten times), which the
     * compiler makes one multiplication: the same as the additions also
     * where they wrap past 2^31.
     */
    static int sums(int x) {
        int[] a = ia;
        a[3] = x;
        int s = a[3] + a[3] + a[3] + a[3] + a[3] + a[3] + a[3] + a[3] + a[3] + a[3];
        return s + a[3] + (s + x);
    }
}
