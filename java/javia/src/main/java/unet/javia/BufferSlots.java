package unet.javia;

import java.util.ArrayDeque;

/**
 * Javia-II's buffer tickets posted in the library, by slot: a descriptor's
 * id is {@link #BUF} | slot. With the counts the VI's calls keep of them,
 * and the sends completed that {@code sendBufWait} has not returned yet.
 * Everything here runs under the VI's lock.
 */
final class BufferSlots {
    /** The bit of a descriptor id that marks a buffer ticket's (Javia-I's ids are below it). */
    static final long BUF = 1L << 32;

    private final LibraryQueues queues;
    /** The ticket posted in each slot, null when free. */
    final ViBufferTicket[] tickets;
    /** The offset a buffer receive was posted at, by slot. */
    final int[] off;
    private final int[] free;
    private int freeN;
    /** Buffer receives posted (in the library or held on the lent path). */
    int recvPosted;
    /** Buffer sends posted in the library and not taken back yet. */
    int sendsInLibrary;
    /** Buffer sends completed, not yet returned by sendBufWait. */
    final ArrayDeque<ViBufferTicket> sendDone;

    /** {@code n} slots, posted through {@code queues}. */
    BufferSlots(LibraryQueues queues, int n) {
        this.queues = queues;
        tickets = new ViBufferTicket[n];
        off = new int[n];
        free = new int[n];
        for (int i = 0; i < n; i++) {
            free[i] = n - 1 - i;
        }
        freeN = n;
        sendDone = new ArrayDeque<>(n);
    }

    /** Throws unless {@code t} is a ticket of a buffer registered with {@code vi}. */
    static void checkTicket(ViBufferTicket t, Vi vi) throws ViException {
        if (t == null) {
            throw new ViException("the ticket is null");
        }
        if (t.vi != vi) {
            throw new ViException("the ticket's buffer is registered with another Vi");
        }
    }

    /** What {@link #take} checks of a ticket, for a post that takes no slot. */
    static void checkPostable(ViBufferTicket t) throws ViException {
        if (!t.registered) {
            throw new ViException("the ticket's buffer is unregistered, freed or closed");
        }
        if (t.posted) {
            throw new ViException("the ticket is already posted");
        }
    }

    /** A slot for {@code t}, posted from now on. */
    int take(ViBufferTicket t) throws ViException {
        // A registered ticket's buffer cannot be freed or closed (they
        // refuse while any ticket is registered), and a ticket is
        // unregistered only under this lock while not posted.
        if (!t.registered) {
            throw new ViException("the ticket's buffer is unregistered, freed or closed");
        }
        if (t.posted) {
            throw new ViException("the ticket is already posted");
        }
        if (freeN == 0) {
            throw new ViException("the queues are full: " + tickets.length + " buffer tickets posted");
        }
        int k = free[--freeN];
        tickets[k] = t;
        t.reset();
        t.posted = true;
        return k;
    }

    /** A slot for {@code t}, already posted (on the lent path, going to the library). */
    int adopt(ViBufferTicket t) {
        int k = free[--freeN];
        tickets[k] = t;
        return k;
    }

    /** Slot {@code k} free again; its ticket, if any, no longer posted. */
    void release(int k) {
        ViBufferTicket t = tickets[k];
        if (t != null) {
            t.posted = false;
        }
        tickets[k] = null;
        free[freeN++] = k;
    }

    /** Slot {@code k} free again, its ticket still posted (held on the lent path now). */
    void forget(int k) {
        tickets[k] = null;
        free[freeN++] = k;
    }

    /** The ticket of the buffer send {@code id} completed in the library; its slot free again. */
    ViBufferTicket sendTaken(long id) {
        sendsInLibrary--;
        return taken(id);
    }

    /** The ticket of the buffer receive {@code id} completed in the library; its slot free again. */
    ViBufferTicket recvTaken(long id) {
        recvPosted--;
        return taken(id);
    }

    private ViBufferTicket taken(long id) {
        int k = (int) (id & ~BUF);
        ViBufferTicket t = tickets[k];
        release(k);
        return t;
    }

    /** Whether any buffer send is posted in the library. */
    boolean anySendPosted() {
        return freeN + recvPosted < tickets.length;
    }

    /**
     * Post a send of {@code len} bytes of {@code t}'s buffer from {@code
     * off} in the library, as slot {@code k}: the library's status.
     */
    int postSend(int k, ViBufferTicket t, int off, int len) {
        return queues.postSend(BUF | k, t.buffer.region(), off, len);
    }

    /**
     * Post {@code t}'s buffer from {@code off} (to its end, at most a
     * transfer) in the library for a message, as slot {@code k}: the
     * library's status.
     */
    int postRecv(int k, ViBufferTicket t, int off) {
        return queues.postRecv(BUF | k, t.buffer.region(), off, Math.min(t.buffer.size() - off, Vi.MAX_TRANSFER));
    }

    /** Every ticket posted in the library done with {@code reason}, its slot free. */
    void failAll(String reason) {
        for (int k = 0; k < tickets.length; k++) {
            if (tickets[k] != null) {
                tickets[k].fail(reason);
                release(k);
            }
        }
        sendsInLibrary = 0;
    }

    /** On close: every ticket still posted in the library done with {@code UNET_VI_CLOSED}. */
    void failClosed() {
        for (int k = 0; k < tickets.length; k++) {
            if (tickets[k] != null) {
                tickets[k].fail("UNET_VI_CLOSED");
                tickets[k] = null;
            }
        }
    }
}
