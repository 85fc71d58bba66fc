package unet.javia;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.ConcurrentHashMap;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;

/**
 * A completion queue: the send or receive queues of several VIs report to
 * it, in the order their descriptors complete. It says which VI completed
 * next; take the completion itself from that VI.
 */
public final class ViCompletionQ implements AutoCloseable {
    final MemorySegment cq;
    private final ConcurrentHashMap<Integer, Vi> vis = new ConcurrentHashMap<>();
    private final Arena arena = Arena.ofShared();
    private final MemorySegment outVi = arena.allocate(JAVA_INT);
    private final MemorySegment outQ = arena.allocate(JAVA_INT);
    private volatile boolean closed;

    /**
     * A new, empty completion queue.
     *
     * @throws ViException if the library cannot make one
     */
    public ViCompletionQ() throws ViException {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(ADDRESS);
            int r = (int) Native.CQ_CREATE.invokeExact(out);
            if (r != 0) {
                throw Native.failure("creating a completion queue", r);
            }
            cq = out.get(ADDRESS, 0);
        } catch (ViException e) {
            throw e;
        } catch (Throwable t) {
            throw Native.fatal(t);
        }
    }

    void attach(Vi vi) {
        vis.put(vi.id(), vi);
    }

    void detach(Vi vi) {
        vis.remove(vi.id());
    }

    /**
     * Wait at most {@code microseconds} ({@link Vi#INFINITE}: forever) for
     * the next VI to complete a descriptor.
     *
     * @param microseconds how long to wait
     * @return the VI
     * @throws ViTimeout when none did in time
     * @throws ViException when the queue is closed
     */
    public synchronized Vi waitNext(int microseconds) throws ViException {
        if (closed) {
            throw new ViException("the completion queue is closed");
        }
        int r;
        try {
            r = (int) Native.CQ_WAIT.invokeExact(cq, microseconds < 0 ? -1L : (long) microseconds, outVi, outQ);
        } catch (Throwable t) {
            throw Native.fatal(t);
        }
        if (r == Native.UNET_ETIMEDOUT) {
            throw new ViTimeout(microseconds);
        }
        if (r != 0) {
            throw Native.failure("waiting on a completion queue", r);
        }
        Vi vi = vis.get(outVi.get(JAVA_INT, 0));
        if (vi == null) {
            throw new ViException("a completion of VI " + outVi.get(JAVA_INT, 0) + ", which is closed");
        }
        return vi;
    }

    /** Release the queue: VIs made with it keep reporting to it, unseen. */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        try {
            Native.CQ_FREE.invokeExact(cq);
        } catch (Throwable t) {
            throw Native.fatal(t);
        }
        arena.close();
    }
}
