package unet.javia.bench;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.nio.file.Path;
import java.util.Arrays;

/**
 * What one downcall costs in a JVM on this machine, whatever the callee
 * does: a call to a library function that only picks a constant string
 * ({@code unet_status_name}), made as Javia's data path makes its calls
 * (critical: no thread-state transition; through a constant handle; from a
 * method the JIT compiles whole). Javia's calls on a local VI cost at least
 * this each: the floor under its round trip and bandwidth. {@code unet bench
 * javia} runs it in a JVM of its own before the runs.
 *
 * <p>The figure depends on the code around the call: in one long loop,
 * compiled while it runs, the same call measured from a quarter less to a
 * quarter more. What is measured here is the shape of Javia's calls.
 *
 * <p>Usage: {@code DowncallFloor} with {@code -Dunet.library=PATH}; prints
 * {@code downcall NS}, the median over 11 blocks of a million calls.
 */
public final class DowncallFloor {
    private DowncallFloor() {}

    private static final int BLOCKS = 11;
    private static final int WARM = 20;
    /** Calls in one block: {@code RUNS} runs of {@code RUN} calls. */
    private static final int RUN = 1000;
    private static final int RUNS = 1000;
    private static final int CALLS = RUN * RUNS;

    private static final MethodHandle CALL = bind(System.getProperty("unet.library"));

    public static void main(String[] args) {
        try {
            System.out.printf("downcall %.2f%n", measure());
        } catch (Throwable t) {
            System.err.println("DowncallFloor: " + t);
            System.exit(1);
        }
    }

    // Restricted: binding a native function. Sound: unet_status_name takes
    // an int and returns a pointer (read here as the 64-bit integer it is
    // in the C calling convention, never dereferenced), as include/unet.h
    // declares it.
    @SuppressWarnings("restricted")
    private static MethodHandle bind(String lib) {
        if (lib == null || lib.isEmpty()) {
            return null;
        }
        MemorySegment f = SymbolLookup.libraryLookup(Path.of(lib), Arena.global())
                .find("unet_status_name")
                .orElseThrow(() -> new IllegalStateException(lib + " has no unet_status_name"));
        return Linker.nativeLinker()
                .downcallHandle(f, FunctionDescriptor.of(JAVA_LONG, JAVA_INT), Linker.Option.critical(false));
    }

    /** Median nanoseconds a call over {@code BLOCKS} blocks, after {@code WARM} untimed ones. */
    static double measure() throws Throwable {
        if (CALL == null) {
            throw new IllegalStateException("no -Dunet.library: the library's path is not known");
        }
        double[] ns = new double[BLOCKS];
        long sink = 0;
        for (int b = -WARM; b < BLOCKS; b++) {
            long t0 = System.nanoTime();
            for (int r = 0; r < RUNS; r++) {
                sink += run();
            }
            if (b >= 0) {
                ns[b] = (System.nanoTime() - t0) / (double) CALLS;
            }
        }
        if (sink == 0) {
            throw new IllegalStateException("unet_status_name returned NULL");
        }
        Arrays.sort(ns);
        return ns[BLOCKS / 2];
    }

    /** {@code RUN} calls; the sum of what they returned. */
    private static long run() throws Throwable {
        long sum = 0;
        for (int i = 0; i < RUN; i++) {
            sum += (long) CALL.invokeExact(i & 7);
        }
        return sum;
    }
}
