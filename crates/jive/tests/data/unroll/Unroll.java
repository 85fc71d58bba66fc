/**
 * Small loops (a straight body, no calls) of every back-edge form the
 * compiler unrolls, whose compiled and interpreted runs tests/jit_unroll.rs
 * compares under budgets that run out at every position of a group, with
 * exits and faults at every position.
 */
public class Unroll {
    static volatile int stop;
    static int f;
    static int[] ia = new int[21];
    static byte[] ba = new byte[13];

    /** The null loop of the benchmarks: counted, an exit in the body. */
    static int nullLoop(int n) {
        int i;
        for (i = 0; i < n && stop == 0; i++) {
        }
        return i;
    }

    /** Counted, leaving at i == m (any position of a group). */
    static int exitAt(int n, int m) {
        int s = 0;
        int i;
        for (i = 0; i < n; i++) {
            if (i == m) {
                break;
            }
            s += i;
        }
        return s * 31 + i;
    }

    /** Counted downwards by 3, leaving at i == m. */
    static int down(int n, int m) {
        int s = 0;
        int i;
        for (i = n; i > 0; i -= 3) {
            if (i == m) {
                break;
            }
            s ^= i;
        }
        return s * 31 + i;
    }

    /** Counted with !=: runs until the counter wraps (past any fuel) when n < 0. */
    static int ne(int n) {
        int s = 0;
        int i;
        for (i = 0; i != n; i++) {
            s += i;
        }
        return s + i;
    }

    /** Counted with <= by 2: never ends when n is near Integer.MAX_VALUE. */
    static int le(int n) {
        int s = 0;
        int i;
        for (i = n - 40; i <= n; i += 2) {
            s += i * i;
        }
        return s + i;
    }

    /** Counted with >= downwards, near Integer.MIN_VALUE for n near it. */
    static int ge(int n) {
        int s = 0;
        int i;
        for (i = n + 30; i >= n; i--) {
            s = s * 3 + i;
        }
        return s + i;
    }

    /** A back-edge that is a goto; the exit is in the body. */
    static int whileGoto(int n) {
        int s = 0;
        while (true) {
            s += 7;
            if (s > n) {
                break;
            }
        }
        return s;
    }

    /** A conditional back-edge on a value the body computes (not counted). */
    static int bits(int n) {
        int x = n;
        int c = 0;
        while (x != 0) {
            x = x >>> 1;
            c++;
        }
        return c;
    }

    /** Division by zero at i == d, at any position of a group. */
    static int divide(int n, int d) {
        int s = 0;
        for (int i = 0; i < n; i++) {
            s += 1000 / (d - i);
        }
        return s;
    }

    /** Past the end of ia (21 ints) at i == 21. */
    static int sum(int n) {
        int[] a = ia;
        int s = 0;
        for (int i = 0; i < n; i++) {
            s += a[i];
        }
        return s;
    }

    /** Stores into ba (13 bytes), past its end at i == 13. */
    static int fill(int n, int v) {
        byte[] b = ba;
        int s = 0;
        for (int i = 0; i < n; i++) {
            b[i] = (byte) (v + i);
            s += b[i];
        }
        return s;
    }

    /** A field written in the loop; the counter bound is a field read once. */
    static int field(int n) {
        for (int i = 0; i < n; i++) {
            f = f * 5 + i;
        }
        return f;
    }

    /** The counter written in the body too (not counted). */
    static int skip(int n) {
        int s = 0;
        for (int i = 0; i < n; i++) {
            s += i;
            i += i & 1;
        }
        return s;
    }

    /** A body that branches inside itself. */
    static int branchy(int n) {
        int s = 0;
        for (int i = 0; i < n; i++) {
            if ((i & 3) == 3) {
                s += 5;
            }
            s--;
        }
        return s;
    }

    static int twice(int x) {
        return x + x;
    }

    /** A call in the body (not unrolled). */
    static int withCall(int n) {
        int s = 0;
        for (int i = 0; i < n; i++) {
            s += twice(i);
        }
        return s;
    }

    /** An inner small loop in an outer one. */
    static int nested(int n, int m) {
        int s = 0;
        for (int i = 0; i < n; i++) {
            for (int j = 0; j < m; j++) {
                s += j ^ i;
            }
        }
        return s;
    }

    /** A body of one op, and a bound the body moves towards the counter. */
    static int meet(int n) {
        int i = 0;
        int j = n;
        while (i < j) {
            j--;
            i++;
        }
        return i * 1000 + j;
    }

    /**
     * The benchmarks' math: ten additions of a local that changes at each
     * iteration (one multiplication in every copy), wrapping past 2^31.
     */
    static int tenfold(int n) {
        int y = 0;
        for (int i = 0; i < n && stop == 0; i++) {
            int x = i + n;
            y = x + x + x + x + x + x + x + x + x + x;
        }
        return y;
    }

    static int[] four = new int[4];
    static int[] three = new int[3];

    /**
     * Constant indices in every copy: a[3], then a branch to the
     * back-edge (taken while i < m) past a[4] (past the end), so that
     * the first access past the end is at iteration m, at any position
     * of a group, after copies that did not reach it.
     */
    static int gated(int n, int m) {
        int[] a = four;
        int s = 0;
        for (int i = 0; i < n; i++) {
            s += a[3];
            if (i >= m) {
                s += a[4];
            }
        }
        return s;
    }

    /**
     * Constant indices proved in one copy and used unchecked in the next
     * (a[3] read, a[1] written, the back-edge reached from them alone),
     * and a[2] read from iteration m on.
     */
    static int kept(int n, int m) {
        int[] a = four;
        int s = 0;
        for (int i = 0; i < n; i++) {
            if (i >= m) {
                s += a[2];
            }
            s += a[3];
            a[1] = s;
        }
        return s + a[1];
    }

    /**
     * The array a local holds changes inside the loop (at iteration m,
     * to one too short for a[3]), so nothing proved in one copy holds in
     * the next.
     */
    static int swap(int n, int m) {
        int[] a = four;
        int[] b = three;
        int s = 0;
        for (int i = 0; i < n; i++) {
            s += a[3] + i;
            if (i == m) {
                a = b;
            }
        }
        return s;
    }

    /**
     * Fibonacci's inner loop, counted up to m: a[i - 1] and a[i - 2] are
     * the elements the copies before stored and loaded; past the end of
     * ia (21 ints) at i == 21.
     */
    static int fib(int n, int m) {
        int[] f = ia;
        f[0] = n;
        f[1] = 1;
        for (int i = 2; i < m; i++) {
            f[i] = f[i - 1] + f[i - 2];
        }
        return f[20] + f[m & 15];
    }

    /** Fibonacci's inner loop as Bench.fibonacci has it (to f.length, a goto back-edge). */
    static int fibLength(int n, int m) {
        int[] f = ia;
        f[0] = n;
        f[1] = m;
        for (int i = 2; i < f.length; i++) {
            f[i] = f[i - 1] + f[i - 2];
        }
        return f[f.length - 1];
    }

    /**
     * An element read through one local, written through another holding
     * the same array, read again (so read from the array again); past
     * the end at i == 22.
     */
    static int alias(int n, int m) {
        int[] a = ia;
        int[] b = ia;
        int s = 0;
        for (int i = 1; i < n; i++) {
            s += b[i - 1];
            a[i - 1] = s + m;
            s += b[i - 1];
        }
        return s;
    }

    /**
     * An element read at index k + 1, written at index j (of another
     * value, the same element when m is 1 or 17 and k below 15), read
     * at k + 1 again.
     */
    static int twoIndices(int n, int m) {
        int[] a = ia;
        int s = 0;
        for (int i = 0; i < n; i++) {
            int k = i & 15;
            int j = (i + m) & 15;
            s += a[k + 1] + i;
            a[j] = s;
            s += a[k + 1];
        }
        return s;
    }

    /** Never returns: only fuel, a checkpoint or the time limit stops it. */
    static int forever(int n) {
        int s = n;
        while (true) {
            s++;
        }
    }
}
