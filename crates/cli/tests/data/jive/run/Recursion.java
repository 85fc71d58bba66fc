// Recursion: factorial, Fibonacci, Ackermann, and the macro benchmark's
// quicksort of 1000 reverse-ordered ints, which nests about 1000 frames deep
// and must pass with the default limits.
//
// expect: fact 10 => 3628800
// expect: fact 13 => 1932053504
// expect: fib 20 => 6765
// expect: ack 2 3 => 9
// expect: qsortReversed 1000 => 1
// expect: qsortChecksum 1000 => 0
// expect: depth 1000 => 1000
// expect: mutual 1001 => 1
public class Recursion {
    static int fact(int n) { return n <= 1 ? 1 : n * fact(n - 1); }

    static int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

    static int ack(int m, int n) {
        if (m == 0) return n + 1;
        if (n == 0) return ack(m - 1, 1);
        return ack(m - 1, ack(m, n - 1));
    }

    static void qsort(int[] a, int lo, int hi) {
        if (lo >= hi) return;
        int pivot = a[hi];
        int i = lo - 1;
        for (int j = lo; j < hi; j++) {
            if (a[j] <= pivot) {
                i++;
                int t = a[i]; a[i] = a[j]; a[j] = t;
            }
        }
        int t = a[i + 1]; a[i + 1] = a[hi]; a[hi] = t;
        qsort(a, lo, i);
        qsort(a, i + 2, hi);
    }

    static int[] reversed(int n) {
        int[] a = new int[n];
        for (int i = 0; i < n; i++) a[i] = n - i;
        return a;
    }

    // 1 when sorting n reverse-ordered ints leaves them ascending
    static int qsortReversed(int n) {
        int[] a = reversed(n);
        qsort(a, 0, n - 1);
        for (int i = 0; i < n; i++) {
            if (a[i] != i + 1) return 0;
        }
        return 1;
    }

    // position-weighted sum after sorting, against the one computed directly
    static int qsortChecksum(int n) {
        int[] a = reversed(n);
        qsort(a, 0, n - 1);
        int s = 0;
        for (int i = 0; i < n; i++) s = s * 31 + a[i] * (i + 1);
        int t = 0;
        for (int i = 0; i < n; i++) t = t * 31 + (i + 1) * (i + 1);
        return s - t;
    }

    static int depth(int n) { return n == 0 ? 0 : 1 + depth(n - 1); }

    static int even(int n) { return n == 0 ? 1 : odd(n - 1); }
    static int odd(int n) { return n == 0 ? 0 : even(n - 1); }
    static int mutual(int n) { return odd(n); }
}
