import java.util.Arrays;

/**
 * Times Bench's methods on HotSpot the way {@code unet bench jive} times them
 * on JIVE: {@code java BenchMain REPS WARMUP NAME N [NAME N]...} calls
 * {@code Bench.NAME(N)} WARMUP times untimed, then REPS times each timed with
 * System.nanoTime, and prints {@code NAME N CHECKSUM MEDIAN_NS} per benchmark.
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

    public static void main(String[] args) {
        int reps = Integer.parseInt(args[0]);
        int warmup = Integer.parseInt(args[1]);
        for (int k = 2; k + 1 < args.length; k += 2) {
            String name = args[k];
            int n = Integer.parseInt(args[k + 1]);
            int check = call(name, n);
            for (int w = 0; w < warmup; w++) {
                sink = call(name, n);
            }
            long[] t = new long[reps];
            for (int r = 0; r < reps; r++) {
                long t0 = System.nanoTime();
                int c = call(name, n);
                t[r] = System.nanoTime() - t0;
                if (c != check) {
                    throw new IllegalStateException(name + ": checksum " + c + " then " + check);
                }
                sink = c;
            }
            Arrays.sort(t);
            System.out.println(name + " " + n + " " + check + " " + t[reps / 2]);
        }
    }
}
