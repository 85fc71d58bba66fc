public class Bench {
    static int sf; static int f1, f2; static int[] arr = new int[1]; static int[] data;
    int inst;
    static byte[] buf = new byte[16];
    static int nullLoop(int n) { for (int i = 0; i < n; i++) {} return n; }
    static int empty(int x) { return x; }
    static int nullCall(int n) { int s = 0; for (int i = 0; i < n; i++) { s = empty(i); } return s; }
    static int math(int n) { int x = 3, y = 0; for (int i = 0; i < n; i++) { y = x+x+x+x+x+x+x+x+x+x; } return y; }
    static int fib(int n) { return n < 2 ? n : fib(n-1) + fib(n-2); }
    static void qsort(int[] a, int lo, int hi) {
        if (lo >= hi) return;
        int p = a[(lo+hi) >>> 1]; int i = lo, j = hi;
        while (i <= j) { while (a[i] < p) i++; while (a[j] > p) j--; if (i <= j) { int t = a[i]; a[i] = a[j]; a[j] = t; i++; j--; } }
        qsort(a, lo, j); qsort(a, i, hi);
    }
    static int sortTest(int n) { int[] a = new int[n]; for (int i = 0; i < n; i++) a[i] = n - i; qsort(a, 0, n-1); for (int i = 1; i < n; i++) if (a[i-1] > a[i]) return -1; return a[0] + a[n-1]; }
    int virt(int a) { inst += a; return inst; }
    static int edge(int a, int b) { return (a / b) + (a % b) + (a << 33) + (a >>> 31) + (byte) a + (short) b; }
    static int sw(int k) { switch (k) { case 1: return 10; case 2: return 20; case 3: return 30; default: return -1; } }
    static int lsw(int k) { switch (k) { case 1: return 10; case 1000: return 20; case -5: return 30; default: return -1; } }
    static int nat(int x) { unet.sle.Natives.nop(); byte[] b = new byte[4]; unet.sle.Natives.fill(b, 7, 3); return unet.sle.Natives.sum(b, 0, 4) + unet.sle.Natives.id(x); }
    static int alloc(int n) { int s = 0; for (int i = 0; i < n; i++) { byte[] b = new byte[1000]; s += b.length; } return s; }
    static int forever() { int i = 0; while (true) { i++; } }
    static int deep(int n) { return deep(n + 1); }
    static boolean[] zs = new boolean[2];
    static int bools(int v) { byte[] b = new byte[1]; b[0] = (byte) v; zs[0] = (v & 1) == 1; return b[0] + (zs[0] ? 100 : 0); }

    static int fieldRead(int n) { int x = 0; for (int i = 0; i < n; i++) { x = sf; } return x; }
    static int fieldWrite(int n) { for (int i = 0; i < n; i++) { sf = i; } return sf; }
    static int arrayRead(int n) { int[] a = arr; int x = 0; for (int i = 0; i < n; i++) { x = a[0]; } return x; }
    static int arrayWrite(int n) { int[] a = arr; for (int i = 0; i < n; i++) { a[0] = i; } return a[0]; }
    static int mathField(int n) { f1 = 3; for (int i = 0; i < n; i++) { f2 = f1+f1+f1+f1+f1+f1+f1+f1+f1+f1; } return f2; }
    static int mathArray(int n) { int[] x = new int[1], y = new int[1]; x[0] = 3; for (int i = 0; i < n; i++) { y[0] = x[0]+x[0]+x[0]+x[0]+x[0]+x[0]+x[0]+x[0]+x[0]+x[0]; } return y[0]; }
    static int nativeNop(int n) { for (int i = 0; i < n; i++) { unet.sle.Natives.nop(); } return n; }
    static int rand(int n) { int[] s = new int[55]; for (int i = 0; i < 55; i++) s[i] = i * 31 + 7; int j = 24, k = 54, r = 0;
        for (int i = 0; i < n; i++) { s[k] = (s[k] + s[j]) % 1000003; r = s[k] / 3 * 7 % 1009; j = (j == 0) ? 54 : j - 1; k = (k == 0) ? 54 : k - 1; } return r; }
}
