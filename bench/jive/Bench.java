import unet.sle.Natives;

/**
 * The U-Net/SLE paper's JIVE benchmarks (section 4) as one JIVE applet.
 *
 * <p>Every benchmark is a static method {@code int name(int n)} that repeats
 * its measured operation {@code n} times (micro) or runs its program
 * {@code n} times (macro) and returns a checksum, which must be the same on
 * JIVE, on HotSpot (BenchMain.java) and in the C version (bench.c). Time per
 * operation = time of the call / n - time per iteration of nullLoop, the loop
 * overhead, as the paper does.
 *
 * <p>Every microbenchmark's loop also reads {@link #stop}, a volatile field
 * that is always 0, at each iteration and leaves the loop if it is set: no
 * compiler (HotSpot's JIT, gcc -O2) may then delete the loop or move its
 * measured operation out of it, so every runtime performs the operation
 * {@code n} times, as JIVE does. The null loop reads it too, so the read is
 * part of the loop overhead subtracted.
 */
public class Bench {
    static int fx = 3;
    static int fy;
    static int[] ax = {3};
    static int[] ay = new int[1];
    static int[] sortData = new int[1000];
    static int[] randState = new int[55];
    static int randJ;
    static int[] fibs = new int[40];
    /** Always 0; read by every microbenchmark's loop (see above). */
    static volatile int stop;

    // ---- micro: the paper's Figure 3 ----

    static int nullLoop(int n) {
        int i;
        for (i = 0; i < n && stop == 0; i++) {
        }
        return i;
    }

    static int nothing() {
        return 1;
    }

    static int nullCall(int n) {
        int y = 0;
        for (int i = 0; i < n && stop == 0; i++) {
            y = nothing();
        }
        return y + n;
    }

    static int fieldRead(int n) {
        int y = 0;
        for (int i = 0; i < n && stop == 0; i++) {
            y = fx;
        }
        return y + n;
    }

    static int fieldWrite(int n) {
        for (int i = 0; i < n && stop == 0; i++) {
            fy = i;
        }
        return fy;
    }

    static int arrayRead(int n) {
        int[] a = ax;
        int y = 0;
        for (int i = 0; i < n && stop == 0; i++) {
            y = a[0];
        }
        return y + n;
    }

    static int arrayWrite(int n) {
        int[] a = ay;
        for (int i = 0; i < n && stop == 0; i++) {
            a[0] = i;
        }
        return a[0];
    }

    /** x is a local that changes at each iteration, so that no compiler computes the sum once. */
    static int math(int n) {
        int y = 0;
        for (int i = 0; i < n && stop == 0; i++) {
            int x = i;
            y = x + x + x + x + x + x + x + x + x + x;
        }
        return y + n;
    }

    static int mathField(int n) {
        for (int i = 0; i < n && stop == 0; i++) {
            fy = fx + fx + fx + fx + fx + fx + fx + fx + fx + fx;
        }
        return fy + n;
    }

    static int mathArray(int n) {
        int[] x = ax;
        int[] y = ay;
        for (int i = 0; i < n && stop == 0; i++) {
            y[0] = x[0] + x[0] + x[0] + x[0] + x[0] + x[0] + x[0] + x[0] + x[0] + x[0];
        }
        return y[0] + n;
    }

    static int nativeCall(int n) {
        for (int i = 0; i < n && stop == 0; i++) {
            Natives.nop();
        }
        return n;
    }

    // ---- macro: the paper's Figure 4 ----

    static void qsortRange(int[] a, int lo, int hi) {
        if (lo >= hi) {
            return;
        }
        int pivot = a[hi];
        int i = lo - 1;
        for (int j = lo; j < hi; j++) {
            if (a[j] <= pivot) {
                i++;
                int t = a[i];
                a[i] = a[j];
                a[j] = t;
            }
        }
        int t = a[i + 1];
        a[i + 1] = a[hi];
        a[hi] = t;
        qsortRange(a, lo, i);
        qsortRange(a, i + 2, hi);
    }

    /** Quicksort of 1000 ints in reverse order (recursive, last element as pivot). */
    static int qsort(int n) {
        int[] a = sortData;
        int check = 0;
        for (int r = 0; r < n; r++) {
            for (int i = 0; i < a.length; i++) {
                a[i] = a.length - i;
            }
            qsortRange(a, 0, a.length - 1);
            check = check * 31 + a[r % a.length];
        }
        return check;
    }

    // Sedgewick, Algorithms in C, "Random Numbers": an additive congruential
    // generator seeded by a linear congruential one, with mult() keeping the
    // products within 32 bits.
    static int mult(int p, int q) {
        int p1 = p / 10000;
        int p0 = p % 10000;
        int q1 = q / 10000;
        int q0 = q % 10000;
        return (((p0 * q1 + p1 * q0) % 10000) * 10000 + p0 * q0) % 100000000;
    }

    static void randInit(int seed) {
        int[] a = randState;
        a[0] = seed;
        for (int j = 1; j < 55; j++) {
            a[j] = (mult(31415821, a[j - 1]) + 1) % 100000000;
        }
        randJ = 0;
    }

    static int randomInt(int r) {
        int[] a = randState;
        int j = (randJ + 1) % 55;
        randJ = j;
        a[j] = (a[(j + 23) % 55] + a[(j + 54) % 55]) % 100000000;
        return ((a[j] / 10000) * r) / 10000;
    }

    /** 100 random numbers below 1000 from a fixed seed. */
    static int rand(int n) {
        int check = 0;
        for (int r = 0; r < n; r++) {
            randInit(1234567);
            for (int i = 0; i < 100; i++) {
                check += randomInt(1000);
            }
        }
        return check;
    }

    /** The first 40 Fibonacci numbers, into an array. */
    static int fibonacci(int n) {
        int[] f = fibs;
        int check = 0;
        for (int r = 0; r < n; r++) {
            f[0] = 0;
            f[1] = 1;
            for (int i = 2; i < f.length; i++) {
                f[i] = f[i - 1] + f[i - 2];
            }
            check += f[f.length - 1] + r;
        }
        return check;
    }

    /** Returns at once: the host-to-applet call overhead. */
    static int ret(int x) {
        return x;
    }
}
