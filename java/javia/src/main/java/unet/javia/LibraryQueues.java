package unet.javia;

import java.lang.foreign.MemorySegment;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * A VI's send and receive queues in the library, as its data path calls
 * them: posts of one segment, polls into one scratch completion, and the
 * wait that gives the VI's lock up while it spins and sleeps. Everything
 * here runs under the VI's lock.
 */
final class LibraryQueues {
    /** Polls between two reads of the clock while a wait spins. */
    static final int CLOCK_EVERY = 16;

    /** How long a wait holds the lock at a time while it sleeps. */
    static final long SLICE_US = 200;

    private final Vi owner;
    private final ViLock lock;
    /**
     * Messages go straight between the two processes (a local VI), not
     * through the engines: a wait then spins here, polling; on the
     * engines' path it waits in the library at once, whose spin looks at
     * one word between polls (a poll of an engine VI costs its engine
     * work: polling it in a loop made a round trip 2.5 times as long).
     */
    private final boolean direct;
    private final int spinMicros;

    // Scratch structures for the downcalls (used under the lock).
    private final MemorySegment seg;
    private final MemorySegment comp;
    /**
     * The addresses of the VI handle, {@code seg} and {@code comp}, as the
     * data path's calls take them: valid until the VI closes (under the
     * lock, as every call that uses them).
     */
    private final long viA;
    private final long segA;
    private final long compA;

    LibraryQueues(Vi owner, ViLock lock, long viA, boolean direct, int spinMicros, MemorySegment seg,
            MemorySegment comp) {
        this.owner = owner;
        this.lock = lock;
        this.viA = viA;
        this.direct = direct;
        this.spinMicros = spinMicros;
        this.seg = seg;
        this.comp = comp;
        this.segA = seg.address();
        this.compA = comp.address();
    }

    /** Post a send of {@code len} bytes of {@code region} from {@code at} as {@code id}: the library's status. */
    int postSend(long id, MemorySegment region, long at, long len) {
        segment(region, at, len);
        try {
            return (int) Native.POST_SEND.invokeExact(viA, id, segA, 1L);
        } catch (Throwable t) {
            throw Native.fatal(t);
        }
    }

    /** Post {@code len} bytes of {@code region} from {@code at} for a message, as {@code id}: the library's status. */
    int postRecv(long id, MemorySegment region, long at, long len) {
        segment(region, at, len);
        try {
            return (int) Native.POST_RECV.invokeExact(viA, id, segA, 1L);
        } catch (Throwable t) {
            throw Native.fatal(t);
        }
    }

    /** The scratch segment a post passes: {@code len} bytes of {@code region} from {@code at}. */
    private void segment(MemorySegment region, long at, long len) {
        seg.set(ADDRESS, 0, region);
        seg.set(JAVA_LONG, 8, at);
        seg.set(JAVA_LONG, 16, len);
    }

    /** Send {@code len} bytes of {@code b} from {@code off} straight from the array, as {@code id}: the library's status. */
    int sendCopied(long id, byte[] b, int off, int len) {
        try {
            return (int) Native.SEND_COPIED.invokeExact(viA, id, MemorySegment.ofArray(b).asSlice(off, len),
                    (long) len);
        } catch (Throwable t) {
            throw Native.fatal(t);
        }
    }

    /** One poll of the send queue into the completion: 1 when something completed. */
    int sendDone() {
        try {
            return (int) Native.SEND_DONE.invokeExact(viA, compA);
        } catch (Throwable t) {
            throw Native.fatal(t);
        }
    }

    /** One poll of the receive queue into the completion: 1 when something completed. */
    int recvDone() {
        try {
            return (int) Native.RECV_DONE.invokeExact(viA, compA);
        } catch (Throwable t) {
            throw Native.fatal(t);
        }
    }

    /** The descriptor id of the completion last taken. */
    long doneId() {
        return comp.get(JAVA_LONG, 0);
    }

    /** The status of the completion last taken (0: well; else minus a VI error). */
    int doneStatus() {
        return comp.get(JAVA_INT, 8);
    }

    /** The length of the completion last taken. */
    int doneLen() {
        return comp.get(JAVA_INT, 12);
    }

    /** The clock at which a wait of {@code microseconds} ({@link Vi#INFINITE}: forever) ends. */
    static long deadline(int microseconds) {
        return microseconds < 0 ? Long.MAX_VALUE : System.nanoTime() + microseconds * 1000L;
    }

    /**
     * Wait until {@code deadline} for the next completion of the send
     * ({@code send}) or receive queue, into the completion. Polls for the spin
     * time (a local VI; one through the engines skips this), then waits in
     * the library in slices (it spins, then sleeps); between polls and slices
     * it gives the lock to any thread that waits for it, so that a blocked
     * sender never holds up a receiver on another thread, nor the reverse.
     * False when the queue has nothing outstanding (any more: another
     * thread may have taken it while the lock was given up).
     */
    boolean waitDone(boolean send, long deadline, int microseconds) throws ViException {
        // The clock is read every CLOCK_EVERY polls only: a read costs about
        // what a poll does, and a message that comes during it waits.
        long spinEnd = 0;
        int polls = 0;
        while (true) {
            if ((send ? sendDone() : recvDone()) == 1) {
                return true;
            }
            if (polls++ % CLOCK_EVERY != 0) {
                Thread.onSpinWait();
                continue;
            }
            long now = System.nanoTime();
            if (spinEnd == 0) {
                spinEnd = direct ? now + spinMicros * 1000L : now;
            }
            if (now >= deadline) {
                throw new ViTimeout(microseconds);
            }
            if (now < spinEnd) {
                if (lock.hasQueuedThreads()) {
                    lock.unlock();
                    Thread.onSpinWait();
                    lock.lock();
                    owner.check();
                } else {
                    Thread.onSpinWait();
                }
                continue;
            }
            long slice = Math.min(SLICE_US, Math.max(1, (deadline - now) / 1000));
            int r;
            try {
                r = send ? (int) Native.SEND_WAIT.invokeExact(viA, slice, compA)
                        : (int) Native.RECV_WAIT.invokeExact(viA, slice, compA);
            } catch (Throwable t) {
                throw Native.fatal(t);
            }
            if (r == 0) {
                return true;
            }
            if (r == Native.UNET_ENOTPOSTED) {
                return false;
            }
            if (r != Native.UNET_ETIMEDOUT) {
                throw Native.failure(send ? "waiting for a send" : "waiting for a receive", r);
            }
            if (lock.hasQueuedThreads()) {
                lock.unlock();
                Thread.yield();
                lock.lock();
                owner.check();
            }
        }
    }
}
