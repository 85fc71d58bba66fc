package unet.javia.bench;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.management.CompilationMXBean;
import java.lang.management.ManagementFactory;
import java.util.Arrays;

/**
 * One end of a Javia benchmark run, as {@code unet bench javia} starts it:
 * the {@code pong} end is started first and prints {@code ready}, then the
 * {@code ping} end connects, and both follow the same plan. For each
 * message size, in order:
 *
 * <ul>
 *   <li>round trip: {@code --warmup} untimed round trips (and more until {@code --warm-ms}
 *       passed: the JIT compiles meanwhile), then {@code --iters} timed one by one, then an
 *       empty message that ends them; {@code ping} prints {@code rt SIZE MEDIAN_NS P10_NS
 *       P90_NS};
 *   <li>bandwidth: {@code --warm-bursts} untimed bursts (and more until neither JVM's JIT
 *       compiled anything for a while), then {@code --reps} timed ones, of {@code --bytes / SIZE}
 *       messages (64 to 100 000) from {@code ping} to {@code pong}, each answered by an
 *       acknowledgement once all arrived (of one byte, or two if the pong end's JIT compiled
 *       meanwhile), then an empty message that ends them; {@code ping} times each burst from its
 *       first send to the acknowledgement and prints {@code bw SIZE MEDIAN_BYTES_PER_S}.
 * </ul>
 *
 * The last echoed message of each size is compared with what was sent; a
 * difference, like any failure, ends the program with status 1 and the
 * reason on standard error.
 *
 * <p>Usage: {@code JaviaBench ping|pong KIND [--sizes 4,64,...] [--iters
 * N] [--warmup N] [--warm-ms N] [--reps N] [--warm-bursts N] [--bytes N] [--tag N] [--addr local|HOST:PORT]
 * [--aeron-dir DIR] [--confined true|false] [--read true|false]}, KIND one of {@code copy} (Javia-I, the array copied
 * into Javia's buffers), {@code inplace} (Javia-I, the array handed to the
 * library for the call), {@code buffer} (Javia-II), {@code aeron} (Aeron
 * IPC, the pong end running the media driver).
 */
public final class JaviaBench {
    private JaviaBench() {}

    /** The plan both ends follow. */
    static final class Plan {
        int[] sizes = {4, 64, 1024, 4096, 32768};
        int iters = 10_000;
        int warmup = 2_000;
        int reps = 5;
        /** Untimed bursts before the timed ones (the JIT compiles the burst loop meanwhile). */
        int warmBursts = 20;
        /** Least time the untimed round trips take (five times as long before the first size). */
        long warmMs = 100;
        long bytes = 8L << 20;
        int tag = 7100;
        String addr = "local";
        String aeronDir;
        /** Javia's VIs confined to the thread that drives them (no lock on their calls). */
        boolean confined = true;
        /**
         * The ping end and the bandwidth receiver read each cache line of
         * every message they receive ({@link JaviaBench#sum}), as a program
         * that receives data does; the echoing end reads it to send it
         * back either way.
         */
        boolean read = true;

        int max() {
            return Arrays.stream(sizes).max().orElse(1);
        }

        /** Messages in one bandwidth burst of {@code size}-byte messages. */
        int burst(int size) {
            return (int) Math.max(64, Math.min(100_000, bytes / Math.max(1, size)));
        }

        /** Timed round trips for {@code size}: fewer for the large ones. */
        int iters(int size) {
            return size <= 4096 ? iters : Math.max(100, (int) ((long) iters * 4096 / size));
        }
    }

    /** One side of the transport being measured. */
    interface Peer extends AutoCloseable {
        /** Fill the message of {@code size} bytes to send with a pattern. */
        void fill(int size) throws IOException;

        /** Send the message ({@code size} bytes). */
        void send(int size) throws IOException;

        /** Receive one message; its length. */
        int recv() throws IOException;

        /**
         * Receive one message and send it back as it came; an empty message
         * ends the round trips and is not sent back.
         *
         * @return the message's length (0: the round trips are over)
         */
        int echo() throws IOException;

        /** Send {@code n} messages of {@code size} bytes as fast as the transport takes them. */
        void burst(int size, int n) throws IOException;

        /** Receive {@code n} messages. */
        void drain(int n) throws IOException;

        /** The next message received is the one {@link #echoed} looks at. */
        default void keepNext() {}

        /** Whether the last message received equals the last one sent, over {@code size} bytes. */
        boolean echoed(int size);

        @Override
        void close() throws IOException;
    }

    public static void main(String[] args) {
        try {
            run(args);
        } catch (Exception e) {
            System.err.println("JaviaBench: " + e);
            e.printStackTrace(System.err);
            System.exit(1);
        }
    }

    static void run(String[] args) throws Exception {
        if (args.length < 2) {
            throw new IllegalArgumentException("usage: JaviaBench ping|pong copy|inplace|buffer|aeron [options]");
        }
        boolean ping = switch (args[0]) {
            case "ping" -> true;
            case "pong" -> false;
            default -> throw new IllegalArgumentException("role " + args[0] + " is not ping or pong");
        };
        String kind = args[1];
        Plan plan = parse(Arrays.copyOfRange(args, 2, args.length));
        try (Peer p = open(kind, ping, plan)) {
            if (ping) {
                ping(p, plan);
            } else {
                pong(p, plan);
            }
        }
        System.out.println("done");
        System.out.flush();
    }

    static Plan parse(String[] a) {
        Plan p = new Plan();
        for (int i = 0; i + 1 < a.length; i += 2) {
            String v = a[i + 1];
            switch (a[i]) {
                case "--sizes" -> p.sizes = Arrays.stream(v.split(",")).mapToInt(Integer::parseInt).toArray();
                case "--iters" -> p.iters = Integer.parseInt(v);
                case "--warmup" -> p.warmup = Integer.parseInt(v);
                case "--reps" -> p.reps = Integer.parseInt(v);
                case "--warm-bursts" -> p.warmBursts = Integer.parseInt(v);
                case "--warm-ms" -> p.warmMs = Long.parseLong(v);
                case "--bytes" -> p.bytes = Long.parseLong(v);
                case "--tag" -> p.tag = Integer.parseInt(v);
                case "--addr" -> p.addr = v;
                case "--aeron-dir" -> p.aeronDir = v;
                case "--confined" -> p.confined = bool("--confined", v);
                case "--read" -> p.read = bool("--read", v);
                default -> throw new IllegalArgumentException("unknown option " + a[i]);
            }
        }
        if (a.length % 2 != 0) {
            throw new IllegalArgumentException("option " + a[a.length - 1] + " has no value");
        }
        return p;
    }

    private static boolean bool(String option, String v) {
        return switch (v) {
            case "true" -> true;
            case "false" -> false;
            default -> throw new IllegalArgumentException(option + " " + v + " is not true or false");
        };
    }

    /** Bytes between two of a message's bytes that {@link #sum} reads: a cache line. */
    static final int LINE = 64;

    /**
     * The sum of every {@link #LINE}th byte of {@code len} bytes of {@code
     * s} from {@code off}, and of the last: a read of each cache line of a
     * message, as a program that uses it makes, with as little work per
     * line as can be (the same at every end: the Rust end's {@code
     * sum_lines}), so that what it costs is the lines' coming, not the
     * summing.
     */
    static long sum(MemorySegment s, long off, int len) {
        return len < LONG_READ ? lines(s, off, len) : linesOfLong(s, off, len);
    }

    /**
     * Messages of at least this many bytes are read by a loop of their own
     * ({@code linesOf...}): a JVM compiles a loop for the trip counts it
     * has seen, and the one loop compiled at the small sizes first (one or
     * two lines a message) read a 4 KiB message in 36 ns against 22 when
     * compiled at 256 B or more, a tenth of a 4 KiB message's receive.
     */
    static final int LONG_READ = 256;

    private static long lines(MemorySegment s, long off, int len) {
        long sum = 0;
        for (int i = 0; i < len; i += LINE) {
            sum += s.get(ValueLayout.JAVA_BYTE, off + i);
        }
        return len > 0 ? sum + s.get(ValueLayout.JAVA_BYTE, off + len - 1) : sum;
    }

    /** {@link #lines(MemorySegment, long, int)}, for {@link #LONG_READ} bytes or more. */
    private static long linesOfLong(MemorySegment s, long off, int len) {
        long sum = 0;
        for (int i = 0; i < len; i += LINE) {
            sum += s.get(ValueLayout.JAVA_BYTE, off + i);
        }
        return sum + s.get(ValueLayout.JAVA_BYTE, off + len - 1);
    }

    /** {@link #sum(MemorySegment, long, int)} of an array's bytes. */
    static long sum(byte[] a, int off, int len) {
        return len < LONG_READ ? lines(a, off, len) : linesOfLong(a, off, len);
    }

    private static long lines(byte[] a, int off, int len) {
        long sum = 0;
        for (int i = 0; i < len; i += LINE) {
            sum += a[off + i];
        }
        return len > 0 ? sum + a[off + len - 1] : sum;
    }

    /** {@link #lines(byte[], int, int)}, for {@link #LONG_READ} bytes or more. */
    private static long linesOfLong(byte[] a, int off, int len) {
        long sum = 0;
        for (int i = 0; i < len; i += LINE) {
            sum += a[off + i];
        }
        return sum + a[off + len - 1];
    }

    /** What the ends' reads summed, published once at the end (so that no read is left out). */
    static volatile long sums;

    static Peer open(String kind, boolean ping, Plan plan) throws Exception {
        return switch (kind) {
            case "copy" -> JaviaPeers.javiaI(ping, plan, false);
            case "inplace" -> JaviaPeers.javiaI(ping, plan, true);
            case "buffer" -> JaviaPeers.javiaII(ping, plan);
            case "aeron" -> new AeronPeer(ping, plan);
            default -> throw new IllegalArgumentException("kind " + kind + " is not copy, inplace, buffer or aeron");
        };
    }

    /** Tells the starting program this end is ready for the other. */
    static void ready() {
        System.out.println("ready");
        System.out.flush();
    }

    static void ping(Peer p, Plan plan) throws IOException {
        boolean first = true;
        for (int size : plan.sizes) {
            p.fill(size);
            int warm = first ? plan.warmup * 5 : plan.warmup;
            long warmEnd = System.nanoTime() + (first ? 5 : 1) * plan.warmMs * 1_000_000;
            first = false;
            for (int i = 0; i < warm || System.nanoTime() - warmEnd < 0; i++) {
                p.send(size);
                expect(p.recv(), size);
            }
            settle(p, size, plan.warmMs > 0);
            long[] t = new long[plan.iters(size)];
            for (int i = 0; i < t.length; i++) {
                if (i == t.length - 1) {
                    p.keepNext();
                }
                long t0 = System.nanoTime();
                p.send(size);
                int got = p.recv();
                t[i] = System.nanoTime() - t0;
                expect(got, size);
            }
            p.send(0); // the end of the round trips: an empty message, not echoed
            if (!p.echoed(size)) {
                throw new IOException("the echo of a " + size + "-byte message differs from what was sent");
            }
            Arrays.sort(t);
            System.out.printf("rt %d %d %d %d%n", size, t[t.length / 2], t[t.length / 10], t[t.length * 9 / 10]);
            bandwidth(p, plan, size);
        }
    }

    /** The acknowledgement of a burst: all arrived, and the receiving JVM compiled nothing meanwhile. */
    static final int ACK = 1;
    /** The acknowledgement of a burst during which the receiving JVM's JIT compiled something. */
    static final int ACK_COMPILED = 2;

    /**
     * The bandwidth of {@code size}-byte messages, from the ping end:
     * untimed bursts, {@code --warm-bursts} of them and then more until
     * neither JVM's JIT has compiled anything for {@link #SETTLE_QUIET_MS}
     * (the pong end says so in each acknowledgement's length; at most
     * {@link #SETTLE_MAX_NS}, and not with {@code --quick}); then {@code
     * --reps} timed ones; an empty message ends them. The burst and drain
     * loops take their own ways through the library (sends by reference,
     * receives that wait for room), compiled in steps while the bursts
     * run: with {@code --pin} each compilation takes the spinning
     * thread's core for a scheduler slice (4 ms here), and a fixed
     * warm-up left one burst in five that slow.
     */
    static void bandwidth(Peer p, Plan plan, int size) throws IOException {
        int n = plan.burst(size);
        CompilationMXBean jit = plan.warmMs > 0 ? jit() : null;
        long end = System.nanoTime() + SETTLE_MAX_NS;
        long seen = jit == null ? 0 : jit.getTotalCompilationTime();
        long quietSince = System.nanoTime();
        for (int w = 0; ; w++) {
            long now = System.nanoTime();
            boolean settled = jit == null || now - quietSince >= SETTLE_QUIET_MS * 1_000_000 || now - end >= 0;
            if (w >= plan.warmBursts && settled) {
                break;
            }
            p.burst(size, n);
            boolean compiled = ack(p.recv());
            if (jit != null) {
                long c = jit.getTotalCompilationTime();
                if (c != seen || compiled) {
                    seen = c;
                    quietSince = System.nanoTime();
                }
            }
        }
        double[] rates = new double[plan.reps];
        for (int r = 0; r < plan.reps; r++) {
            long t0 = System.nanoTime();
            p.burst(size, n);
            ack(p.recv());
            rates[r] = (double) n * size * 1e9 / (System.nanoTime() - t0);
        }
        p.send(0);
        Arrays.sort(rates);
        System.out.printf("bw %d %.0f%n", size, rates[rates.length / 2]);
        System.out.flush();
    }

    /** Whether acknowledgement length {@code len} says the pong end's JIT compiled during the burst. */
    static boolean ack(int len) throws IOException {
        if (len != ACK && len != ACK_COMPILED) {
            throw new IOException("a " + len + "-byte message came where a burst's acknowledgement was due");
        }
        return len == ACK_COMPILED;
    }

    /** This JVM's JIT, if it can say how long it has compiled; else null. */
    static CompilationMXBean jit() {
        CompilationMXBean jit = ManagementFactory.getCompilationMXBean();
        return jit != null && jit.isCompilationTimeMonitoringSupported() ? jit : null;
    }

    /** How long the JIT must have compiled nothing before {@link #settle} ends, in milliseconds. */
    static final long SETTLE_QUIET_MS = 300;
    /** The longest {@link #settle} goes on, in nanoseconds. */
    static final long SETTLE_MAX_NS = 3_000_000_000L;

    /**
     * Untimed round trips until this JVM's JIT has compiled nothing for
     * {@link #SETTLE_QUIET_MS}: a path whose branches change (a size that
     * takes another way through the library, the first send by reference
     * after small messages) is recompiled in steps for up to a second or
     * two, slower still with {@code --pin}, where the compiler threads
     * share a core with the spinning thread; a fixed warm-up timed those
     * steps. The other end's JVM compiles the same path meanwhile. At most
     * three seconds a size; skipped with {@code --quick}.
     */
    static void settle(Peer p, int size, boolean on) throws IOException {
        if (!on) {
            return;
        }
        CompilationMXBean jit = jit();
        if (jit == null) {
            return;
        }
        long end = System.nanoTime() + SETTLE_MAX_NS;
        long seen = jit.getTotalCompilationTime();
        long quietSince = System.nanoTime();
        while (System.nanoTime() - end < 0) {
            for (int i = 0; i < 1000; i++) {
                p.send(size);
                expect(p.recv(), size);
            }
            long now = System.nanoTime();
            long c = jit.getTotalCompilationTime();
            if (c != seen) {
                seen = c;
                quietSince = now;
            } else if (now - quietSince >= SETTLE_QUIET_MS * 1_000_000) {
                return;
            }
        }
    }

    static void pong(Peer p, Plan plan) throws IOException {
        for (int size : plan.sizes) {
            while (p.echo() != 0) {
                // until the empty message that ends the round trips
            }
            // Bursts until an empty message; each acknowledged with whether
            // this JVM compiled meanwhile (see bandwidth).
            p.fill(ACK_COMPILED);
            int burst = plan.burst(size);
            CompilationMXBean jit = jit();
            long seen = jit == null ? 0 : jit.getTotalCompilationTime();
            for (int first = p.recv(); first != 0; first = p.recv()) {
                expect(first, size);
                p.drain(burst - 1);
                long c = jit == null ? 0 : jit.getTotalCompilationTime();
                p.send(c != seen ? ACK_COMPILED : ACK);
                seen = c;
            }
        }
    }

    static void expect(int got, int size) throws IOException {
        if (got != size) {
            throw new IOException("a " + got + "-byte message came where one of " + size + " bytes was due");
        }
    }

    /** The byte at {@code i} of a message of {@code size} bytes. */
    static byte pattern(int size, int i) {
        return (byte) (i * 7 + size);
    }
}
