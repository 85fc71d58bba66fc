/** Allocating methods whose compiled and interpreted runs tests/jit.rs compares. */
public class Alloc {
    static int[] kept;

    /** The last element of a fresh array of n ints holding v at 0 and n - 1. */
    static int[] mk(int n, int v) { int[] t = new int[n]; t[0] = v; t[n - 1] = v; return t; }

    static int[] fill(int[] x, int v) { for (int i = 0; i < x.length; i++) x[i] = v + i; return x; }

    static int pick(int[] x, short[] y) { return x[0] + x[3] + y.length; }

    /** Allocation in a loop: arrays live in locals (a, b), in a field, and on the operand stack
        (fill's result while the short[] is allocated) across the collections garbage sets off. */
    static int churn(int n, int k) {
        int[] a = new int[4]; a[0] = 11; a[3] = 44;
        byte[] b = new byte[3]; b[1] = 5;
        kept = new int[2]; kept[1] = 9;
        int s = 0;
        for (int i = 0; i < n; i++) {
            int[] t = new int[k];
            t[k - 1] = i;
            s += t[k - 1] + t.length;
            s += pick(fill(new int[4], i), new short[k]);
        }
        return s + a[0] + a[3] + b[1] + a.length + kept[1];
    }

    /** Allocation in a compiled callee (mk) of a compiled caller, whose array stays live. */
    static int viaCallee(int n, int k) {
        int[] keep = mk(3, 99);
        int s = 0;
        for (int i = 0; i < n; i++) { int[] t = mk(k, i); s += t[0] + t[k - 1]; }
        return s + keep[0] + keep[2];
    }

    /** Allocation at every level of a recursion, with each level's array live across the call
        and garbage made at every level. */
    static int rec(int d, int k) {
        int[] a = new int[k]; a[0] = d; a[k - 1] = d;
        for (int j = 0; j < 3; j++) { byte[] g = new byte[k]; g[0] = 1; }
        if (d > 0) { int r = rec(d - 1, k); return r + a[0] + a[k - 1]; }
        return a[0] + a.length;
    }

    /** Arrays that all stay live: past the quota, the allocation faults (the third, here). */
    static int hog(int n) {
        int[] a = new int[n]; int[] b = new int[n]; int[] c = new int[n];
        return a.length + b.length + c.length;
    }

    /** A negative size faults at its newarray (the second one for odd n). */
    static int neg(int n) {
        int[] a = new int[n & 7];
        if ((n & 1) == 1) { byte[] b = new byte[-n]; return b.length; }
        return a.length;
    }

    /** Allocation in a callee faults in the callee. */
    static int deep(int n) { int[] a = new int[2]; a[1] = mk(n, 3)[0]; return a[1]; }

    /** An array returned to the host. */
    static int[] give(int n) { return mk(n, n); }
}
