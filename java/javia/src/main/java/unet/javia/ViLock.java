package unet.javia;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.concurrent.locks.LockSupport;

/**
 * The lock that orders the calls on one {@link Vi}: reentrant, one atomic
 * compare-and-set to take it and a release store to give it back when
 * nobody contends (a {@code ReentrantLock} costs a full fence more on each
 * release, on every call of the data path). A thread that finds it taken
 * spins briefly, then yields, then parks in short naps, counted in
 * {@link #hasQueuedThreads} so that a long wait can step aside for it.
 *
 * <p>A lock of a confined VI ({@link ViAttributes#setConfined}) is no
 * lock: it only checks that the caller is the VI's thread, and throws
 * {@link WrongThreadException} otherwise.
 */
final class ViLock {
    private static final VarHandle STATE = VarHandles.field(MethodHandles.lookup(), "state", int.class);
    private static final VarHandle WAITERS = VarHandles.field(MethodHandles.lookup(), "waiters", int.class);

    /** 1 while held; changed by compare-and-set and release stores only. */
    @SuppressWarnings("unused")
    private volatile int state;
    /** The holder (written by it alone, read by itself to reenter). */
    private Thread owner;
    /** How many times the holder took it. */
    private int holds;
    /** Threads waiting to take it. */
    private volatile int waiters;

    /** The one thread that may call, for a confined VI; else null. */
    private final Thread confinedTo;

    /** @param confinedTo the VI's thread if it is confined, else null */
    ViLock(Thread confinedTo) {
        this.confinedTo = confinedTo;
    }

    void lock() {
        Thread me = Thread.currentThread();
        if (confinedTo != null) {
            if (me != confinedTo) {
                throw wrongThread();
            }
            return;
        }
        if (owner == me) {
            holds++;
            return;
        }
        if (!STATE.compareAndSet(this, 0, 1)) {
            contended();
        }
        owner = me;
        holds = 1;
    }

    private void contended() {
        WAITERS.getAndAdd(this, 1);
        try {
            for (int n = 0; ; n++) {
                if ((int) STATE.getOpaque(this) == 0 && STATE.compareAndSet(this, 0, 1)) {
                    return;
                }
                if (n < 256) {
                    Thread.onSpinWait();
                } else if (n < 320) {
                    Thread.yield();
                } else {
                    LockSupport.parkNanos(20_000);
                }
            }
        } finally {
            WAITERS.getAndAdd(this, -1);
        }
    }

    private WrongThreadException wrongThread() {
        return new WrongThreadException("this Vi is confined to thread \"" + confinedTo.getName()
                + "\" (ViAttributes.setConfined); called from \"" + Thread.currentThread().getName() + "\"");
    }

    void unlock() {
        if (confinedTo != null) {
            // Only the VI's thread got past lock().
            return;
        }
        if (owner != Thread.currentThread()) {
            throw new IllegalMonitorStateException("the Vi's lock is not held by this thread");
        }
        if (--holds == 0) {
            owner = null;
            STATE.setRelease(this, 0);
        }
    }

    /** Whether some thread waits to take it. */
    boolean hasQueuedThreads() {
        return waiters > 0;
    }
}
