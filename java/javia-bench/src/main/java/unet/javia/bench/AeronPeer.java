package unet.javia.bench;

import io.aeron.Aeron;
import io.aeron.FragmentAssembler;
import io.aeron.Publication;
import io.aeron.Subscription;
import io.aeron.driver.MediaDriver;
import io.aeron.driver.ThreadingMode;
import io.aeron.logbuffer.FragmentHandler;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import org.agrona.DirectBuffer;
import org.agrona.concurrent.BackoffIdleStrategy;
import org.agrona.concurrent.UnsafeBuffer;

/**
 * Aeron's IPC as the peer Javia is compared with: each end publishes on
 * one stream of {@code aeron:ipc} and subscribes to the other's, as
 * Aeron's own Ping and Pong samples do, polling with a busy spin. The
 * {@code pong} end runs the media driver (shared threading, backing off
 * when idle: the driver is not on IPC's data path); messages longer than
 * the IPC MTU are fragmented and reassembled by a {@link FragmentAssembler}.
 */
final class AeronPeer implements JaviaBench.Peer {
    private static final String CHANNEL = "aeron:ipc";
    private static final int PING_STREAM = 1001;
    private static final int PONG_STREAM = 1002;

    private final MediaDriver driver;
    private final Aeron aeron;
    private final Publication pub;
    private final Subscription sub;
    private final UnsafeBuffer msg;
    private final byte[] last;
    private int lastLen;
    private int got;
    private boolean echoing;
    private boolean keep;
    private final FragmentHandler onMessage;
    /** Read every message received ({@link JaviaBench.Plan#read}), summing it here. */
    private final boolean read;
    private long sum;

    AeronPeer(boolean ping, JaviaBench.Plan plan) throws IOException {
        read = plan.read;
        if (plan.aeronDir == null) {
            throw new IllegalArgumentException("aeron needs --aeron-dir");
        }
        driver = ping
                ? null
                : MediaDriver.launch(new MediaDriver.Context()
                        .aeronDirectoryName(plan.aeronDir)
                        .threadingMode(ThreadingMode.SHARED)
                        .sharedIdleStrategy(new BackoffIdleStrategy())
                        .dirDeleteOnStart(true)
                        .dirDeleteOnShutdown(true));
        aeron = Aeron.connect(new Aeron.Context().aeronDirectoryName(plan.aeronDir));
        pub = aeron.addExclusivePublication(CHANNEL, ping ? PING_STREAM : PONG_STREAM);
        sub = aeron.addSubscription(CHANNEL, ping ? PONG_STREAM : PING_STREAM);
        msg = new UnsafeBuffer(ByteBuffer.allocateDirect(Math.max(64, plan.max())));
        last = new byte[Math.max(64, plan.max())];
        // Read in place, as Aeron's samples do: the pong end echoes from
        // the (reassembled) message itself; the ping end copies a message
        // out only when asked to keep it for the check.
        onMessage = new FragmentAssembler((buffer, offset, length, header) -> {
            lastLen = length;
            got++;
            if (echoing && length > 0) { // an empty message ends the round trips
                echoFrom(buffer, offset, length);
                return;
            }
            if (read) {
                sum += sum(buffer, offset, length);
            }
            if (keep) {
                buffer.getBytes(offset, last, 0, Math.min(length, last.length));
                keep = false;
            }
        });
        if (!ping) {
            JaviaBench.ready();
        }
        long deadline = System.nanoTime() + 30_000_000_000L;
        while (!pub.isConnected() || !sub.isConnected()) {
            if (System.nanoTime() > deadline) {
                throw new IOException("Aeron: the other end did not connect in 30 s");
            }
            Thread.onSpinWait();
        }
    }

    @Override
    public void fill(int size) {
        for (int i = 0; i < size; i++) {
            msg.putByte(i, JaviaBench.pattern(size, i));
        }
    }

    private void echoFrom(DirectBuffer b, int offset, int len) {
        while (true) {
            long r = pub.offer(b, offset, len);
            if (r > 0) {
                return;
            }
            if (r == Publication.CLOSED || r == Publication.NOT_CONNECTED || r == Publication.MAX_POSITION_EXCEEDED) {
                throw new IllegalStateException("Aeron: offer failed (" + Publication.errorString(r) + ")");
            }
            Thread.onSpinWait();
        }
    }

    private void offer(UnsafeBuffer b, int len) throws IOException {
        while (true) {
            long r = pub.offer(b, 0, len);
            if (r > 0) {
                return;
            }
            if (r == Publication.CLOSED || r == Publication.NOT_CONNECTED || r == Publication.MAX_POSITION_EXCEEDED) {
                throw new IOException("Aeron: offer failed (" + Publication.errorString(r) + ")");
            }
            Thread.onSpinWait();
        }
    }

    @Override
    public void send(int size) throws IOException {
        offer(msg, size);
    }

    private void await(int n) {
        got = 0;
        while (got < n) {
            if (sub.poll(onMessage, n - got) == 0) {
                Thread.onSpinWait();
            }
        }
    }

    @Override
    public int recv() {
        await(1);
        return lastLen;
    }

    @Override
    public int echo() {
        echoing = true;
        await(1);
        echoing = false;
        return lastLen;
    }

    @Override
    public void keepNext() {
        keep = true;
    }

    @Override
    public void burst(int size, int n) throws IOException {
        for (int i = 0; i < n; i++) {
            offer(msg, size);
        }
    }

    @Override
    public void drain(int n) {
        await(n);
    }

    @Override
    public boolean echoed(int size) {
        for (int i = 0; i < size; i++) {
            if (last[i] != msg.getByte(i)) {
                return false;
            }
        }
        return lastLen == size;
    }

    /** {@link JaviaBench#sum(MemorySegment, long, int)} of a message where Aeron hands it over. */
    private static long sum(DirectBuffer b, int off, int len) {
        return len < JaviaBench.LONG_READ ? lines(b, off, len) : linesOfLong(b, off, len);
    }

    private static long lines(DirectBuffer b, int off, int len) {
        long sum = 0;
        for (int i = 0; i < len; i += JaviaBench.LINE) {
            sum += b.getByte(off + i);
        }
        return len > 0 ? sum + b.getByte(off + len - 1) : sum;
    }

    /** {@link #lines}, for {@link JaviaBench#LONG_READ} bytes or more (see there). */
    private static long linesOfLong(DirectBuffer b, int off, int len) {
        long sum = 0;
        for (int i = 0; i < len; i += JaviaBench.LINE) {
            sum += b.getByte(off + i);
        }
        return sum + b.getByte(off + len - 1);
    }

    @Override
    public void close() {
        JaviaBench.sums += sum;
        aeron.close();
        if (driver != null) {
            driver.close();
        }
    }
}
