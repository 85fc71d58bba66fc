import java.util.Arrays;

/**
 * Times Bench's methods on HotSpot the way {@code unet bench jive} times them
 * on JIVE: {@code java BenchMain REPS WARMUP TARGET_NS NAME N [NAME N]...}
 * calls {@code Bench.NAME(N)} once for the checksum every runtime must agree
 * on and WARMUP times untimed, then sizes its own count M so that one call
 * takes about TARGET_NS (larger for a fast runtime, smaller for a slow one),
 * times REPS calls of {@code Bench.NAME(M)} with System.nanoTime, and prints
 * {@code NAME N CHECKSUM M MEDIAN_NS} per benchmark.
 */
public final class BenchMain {
    private BenchMain() {
    }

    /** Results are stored here so no call is dead code. */
    static volatile int sink;

    static int call(String name, int n) {
        switch (name) {
            case "nullLoop": return Bench.nullLoop(n);
            case "nullCall": return Bench.nullCall(n);
            case "fieldRead": return Bench.fieldRead(n);
            case "fieldWrite": return Bench.fieldWrite(n);
            case "arrayRead": return Bench.arrayRead(n);
            case "arrayWrite": return Bench.arrayWrite(n);
            case "math": return Bench.math(n);
            case "mathField": return Bench.mathField(n);
            case "mathArray": return Bench.mathArray(n);
            case "nativeCall": return Bench.nativeCall(n);
            case "qsort": return Bench.qsort(n);
            case "rand": return Bench.rand(n);
            case "fibonacci": return Bench.fibonacci(n);
            default: throw new IllegalArgumentException("no benchmark " + name);
        }
    }

    /** Largest count a benchmark is sized to. */
    static final int MAX_N = 1 << 29;

    static long time(String name, int n) {
        long t0 = System.nanoTime();
        sink = call(name, n);
        return System.nanoTime() - t0;
    }

    /** The count whose call takes about {@code target} ns, from {@code n}. */
    static int size(String name, int n, long target) {
        long t = time(name, n);
        int m = n;
        if (t > 2 * target) {
            m = (int) Math.max(1, (long) ((double) n * target / t));
            t = time(name, m);
        }
        while (t < target && m < MAX_N) {
            double grow = Math.min(64.0, Math.max(2.0, (double) target / Math.max(t, 100) * 1.2));
            m = (int) Math.min(MAX_N, (long) (m * grow));
            t = time(name, m);
        }
        return m;
    }

    public static void main(String[] args) {
        int reps = Integer.parseInt(args[0]);
        int warmup = Integer.parseInt(args[1]);
        long target = Long.parseLong(args[2]);
        for (int k = 3; k + 1 < args.length; k += 2) {
            String name = args[k];
            int n = Integer.parseInt(args[k + 1]);
            int check = call(name, n);
            for (int w = 0; w < warmup; w++) {
                sink = call(name, n);
            }
            int m = size(name, n, target);
            int checkM = call(name, m);
            long[] t = new long[reps];
            for (int r = 0; r < reps; r++) {
                long t0 = System.nanoTime();
                int c = call(name, m);
                t[r] = System.nanoTime() - t0;
                if (c != checkM) {
                    throw new IllegalStateException(name + ": checksum " + checkM + " then " + c);
                }
                sink = c;
            }
            Arrays.sort(t);
            System.out.println(name + " " + n + " " + check + " " + m + " " + t[reps / 2]);
        }
    }
}
