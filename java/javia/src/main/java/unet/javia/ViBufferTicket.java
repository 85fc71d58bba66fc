package unet.javia;

import java.lang.foreign.MemorySegment;

/**
 * A {@link ViBuffer} registered with a {@link Vi} (the paper's Javia-II
 * descriptor): posted with {@link Vi#sendBufPost} or {@link Vi#recvBufPost}
 * and returned, done, by {@link Vi#sendBufWait} or {@link Vi#recvBufWait}.
 * Its state is published to any thread that reads {@link #isDone()}
 * without a lock.
 */
public final class ViBufferTicket extends Ticket {
    final ViBuffer buffer;
    final Vi vi;
    /** The buffer's memory (it cannot be freed or closed while the ticket is registered). */
    final MemorySegment memory;
    /** Registered: cleared under the buffer's lock and the VI's, while not posted. */
    boolean registered = true;
    /**
     * Whether the buffer is granted to the VI's peer for sends by reference
     * on the lent path: 0 not asked yet, 1 granted, 2 refused (under the
     * VI's lock).
     */
    byte grant;

    ViBufferTicket(ViBuffer b, Vi vi, MemorySegment memory) {
        this.buffer = b;
        this.vi = vi;
        this.memory = memory;
    }

    /** @return the buffer */
    public ViBuffer getBuffer() {
        return buffer;
    }
}
