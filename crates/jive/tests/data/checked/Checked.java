/**
 * Accesses at an index an earlier access of the same straight run checked
 * on the same array, which compiled code makes without a second check;
 * tests/jit_checked.rs compares compiled and interpreted runs of these
 * methods: qsort's swap (each index read, then written), a local pointed
 * at a shorter array after the check (on a path of its own and in the
 * same run), an index changed after its check, constant offsets of one
 * index, a byte array, a call between the check and the store, and
 * qsort's inner loop.
 */
public class Checked {
    static int[] big = new int[16];
    static int[] small = new int[5];
    static byte[] bytes = new byte[9];

    /** qsort's swap: each index read, then written. */
    static int swap(int i, int j) {
        int[] a = big;
        int t = a[i];
        a[i] = a[j];
        a[j] = t + 1;
        return a[i] * 31 + a[j];
    }

    /** An index checked on one array, then (on one path) a shorter array. */
    static int repoint(int k, int m) {
        int[] a = big;
        int x = a[k];
        if (m > 0) {
            a = small;
        }
        a[k] = x + m;
        return a[k];
    }

    /** An index checked on one array, then a shorter array in the same run. */
    static int reassign(int k, int m) {
        int[] a = big;
        int x = a[k];
        a = small;
        a[k] = x + m;
        return a[k] + a[m & 3];
    }

    /** An index changed after its check. */
    static int moved(int k, int m) {
        int[] a = big;
        int x = a[k];
        k = k + m;
        a[k] = x;
        return a[k - m];
    }

    /** Constant offsets of one index. */
    static int affine(int k, int m) {
        int[] a = big;
        a[k + 1] = m;
        a[k] = a[k + 1] + 1;
        int t = a[k + 2];
        a[k + 2] = a[k];
        return t + a[k + 1];
    }

    /** A byte array: a store after a load at the same index narrows. */
    static int bytes(int k, int m) {
        byte[] b = bytes;
        int x = b[k];
        b[k] = (byte) (x + m);
        return b[k] + x;
    }

    static int peek(int k) {
        return k >= 0 && k < small.length ? small[k] : -1;
    }

    /** A call between the check and the store at the same index. */
    static int aroundCall(int k, int m) {
        int[] a = big;
        int x = a[k];
        int y = peek(k);
        a[k] = x + y + m;
        return a[k];
    }

    /** qsort's inner loop over the first n elements, pivot p. */
    static int loopSwap(int n, int p) {
        int[] a = big;
        for (int i = 0; i < a.length; i++) {
            a[i] = a.length - i;
        }
        int i = -1;
        for (int j = 0; j < n; j++) {
            if (a[j] <= p) {
                i++;
                int t = a[i];
                a[i] = a[j];
                a[j] = t;
            }
        }
        return i * 1000 + a[0] * 37 + a[a.length - 1];
    }
}
