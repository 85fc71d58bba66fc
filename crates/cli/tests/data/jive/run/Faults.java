// Runtime faults: each stops the call with exit 3 and `fault: ...`. On the
// JVM the same calls throw the corresponding exceptions. The endless loops
// run on JIVE only (the JVM would not stop); JIVE's fuel budget ends them
// (here a small one; jive_applets.rs also checks the default budget stops
// them within a second).
//
// expect: div 7 0 => fault zero
// expect: rem 7 0 => fault zero
// expect: bounds 4 => fault 4
// expect: bounds -1 => fault -1
// expect: boundsStore 10 => fault 10
// expect: nullArray => fault null
// expect: nullLength => fault null
// expect: negativeSize -3 => fault -3
// expect: inInit => 0
// expect: ok 5 => 5
// expect-jive: --fuel 2000000 spin => fault fuel
// expect-jive: --fuel 2000000 spinCalls 1 => fault fuel
// expect-jive: runaway 1 => fault
// expect-jive: --heap 4096 allocate 100000 => fault heap
// expect-jive: --fuel 1000 count 10000 => fault fuel
// expect-jive: --fuel 10000000 count 10000 => 10000
// expect-jive: --depth 50 depth 100 => fault
// expect-jive: --depth 200 depth 100 => 100
public class Faults {
    static int[] none;
    static int div(int a, int b) { return a / b; }
    static int rem(int a, int b) { return a % b; }

    static int bounds(int i) {
        int[] a = new int[4];
        return a[i];
    }

    static void boundsStore(int i) {
        byte[] a = new byte[10];
        a[i] = 1;
    }

    static int nullArray() { return none[0]; }

    static int nullLength() { return none.length; }

    static int negativeSize(int n) { return new int[n].length; }

    static int inInit() { return 0; }

    static int ok(int x) { return x; }

    static void spin() {
        for (;;) { }
    }

    static int spinCalls(int x) {
        while (x != 0) x = ok(x);
        return x;
    }

    static int runaway(int x) { return runaway(x + 1) + 1; }

    static int allocate(int n) { return new int[n].length; }

    static int count(int n) {
        int c = 0;
        for (int i = 0; i < n; i++) c++;
        return c;
    }

    static int depth(int n) { return n == 0 ? 0 : 1 + depth(n - 1); }
}
