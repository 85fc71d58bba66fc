/**
 * Calls of small leaf methods, which the compiler emits at the call site
 * instead of calling them; tests/jit_inline.rs compares compiled and
 * interpreted runs of the callers under budgets that stop them at every
 * point and depth limits that make the calls themselves overflow: each
 * kind of return (int, byte, short, boolean, constant, void), division
 * by constants, leaves called in loops and at the bottom of a recursion,
 * and a callee that can fault (a division by its argument), which stays
 * a call.
 */
public class Inline {
    static volatile int stop;

    static int nothing() {
        return 0;
    }

    static int twice(int x) {
        return x + x;
    }

    static int mix(int a, int b, int c) {
        int t = a * 31 + b;
        int u = (c >>> 3) ^ (t << 2);
        return u / 7 - t % 10 + (b | 5) - (c & 12) - (a >> 1);
    }

    static byte low(int x) {
        return (byte) (x * 3 + 1);
    }

    static short half(int x) {
        return (short) (x - 40000);
    }

    static boolean same(boolean z) {
        return z;
    }

    static void ignore(int x) {
        x = x * 2;
    }

    static int answer() {
        return 42;
    }

    static int divide(int a, int b) {
        return a / b;
    }

    /** A loop of nothing but calls, as the benchmark's null call. */
    static int nullLoop(int n) {
        int y = 0;
        for (int i = 0; i < n && stop == 0; i++) {
            y = nothing();
        }
        return y + n;
    }

    /** Every kind of leaf, once each. */
    static int kinds(int x) {
        int a = twice(x);
        int b = mix(x, a, x ^ 0x5a5a);
        int c = low(b);
        int d = half(x * 1000);
        boolean z = same((x & 1) == 1);
        ignore(d);
        return a + b + c + d + (z ? 1 : 0) + answer();
    }

    /** Leaves in a loop whose sum depends on every iteration. */
    static int loop(int n) {
        int s = 0;
        for (int i = 0; i < n; i++) {
            s += mix(i, s, n) + low(i) + twice(s);
        }
        return s;
    }

    /** A leaf at the bottom of a recursion `n` calls deep. */
    static int deep(int n) {
        if (n <= 0) {
            return twice(n + 3) + answer();
        }
        return deep(n - 1) + 1;
    }

    /** A leaf that can fault (division by `b`), called in a loop. */
    static int divideLoop(int n) {
        int s = 0;
        for (int i = -2; i < n; i++) {
            s += twice(i) + divide(100, i);
        }
        return s;
    }
}
