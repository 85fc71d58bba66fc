package unet.javia;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * One end of a VIA connection, with the paper's Javia-I methods: byte
 * arrays in and out, copied through buffers the library registers with the
 * engine when the VI is made.
 *
 * <p>A {@code Vi} is made by connecting ({@link #Vi(ViAddress, ViAttributes,
 * ViCompletionQ, ViCompletionQ, int)}) to a {@link ServerVi} that waits on
 * the same tag, or by {@link ServerVi#accept()}. Its methods may be called
 * from several threads (a lock orders them); a wait, for a send's buffer or
 * a receive, gives the lock up while it spins and takes it back in short
 * slices while it sleeps, so a thread on the other queue is held back at
 * most one slice (200 microseconds). A VI made with {@link
 * ViAttributes#setConfined} belongs to the thread that made it instead: no
 * lock, and a call from another thread throws {@link WrongThreadException}.
 *
 * <p>Failures follow VIA: when the peer goes, a descriptor is bad or a
 * message does not fit, the VI enters the error state; every call then
 * fails with a {@link ViException} naming the reason, and every ticket
 * still posted completes with it ({@link ViBATicket#getError()}).
 */
public final class Vi implements AutoCloseable {
    /** Wait forever. */
    public static final int INFINITE = -1;
    /** The largest message a VI carries, in bytes. */
    public static final int MAX_TRANSFER = 262144;

    /** How long close waits for messages sent to complete. */
    private static final int CLOSE_FLUSH_US = 5_000_000;

    private final ViLock lock;
    private final Arena arena = Arena.ofShared();
    private final MemorySegment vi;
    private final int id;
    private final ViAttributes attrs;
    private final ViCompletionQ sendQ;
    private final ViCompletionQ recvQ;

    /** The VI's queues in the library, as the data path calls them. */
    private final LibraryQueues queues;
    /** Javia-I's buffers and the byte-array tickets posted on them. */
    private final CopyBuffers copy;
    /** Javia-II's buffer tickets posted in the library. */
    private final BufferSlots bufs;
    /**
     * The VI's direct path while the library lends it to Javia, with the
     * buffer tickets on it (never lent for a VI that cannot lend it, or
     * with lending turned off: the system property {@code
     * unet.javia.lend=false}).
     */
    private final Lending lending;

    /** Closed by {@link #close}. */
    boolean closed;
    /** The VI error it broke with, once broken. */
    String broken;

    /**
     * Connect to whoever waits on {@code tag} at {@code mach} (the paper's
     * constructor). {@code sendQ} and {@code recvQ} may be null.
     *
     * @param mach the machine: {@link ViAddress#LOCAL} or an engine's HOST:PORT
     * @param attr the attributes (null: the defaults)
     * @param sendQ the completion queue the send queue reports to, or null
     * @param recvQ the completion queue the receive queue reports to, or null
     * @param tag the discriminator the server waits on
     * @throws ViException when nobody listens, the server refuses, the
     *     reliability levels differ, or the engine cannot be reached
     */
    public Vi(ViAddress mach, ViAttributes attr, ViCompletionQ sendQ, ViCompletionQ recvQ, int tag)
            throws ViException {
        this(ViSetup.connect(mach, attr == null ? new ViAttributes() : attr, sendQ, recvQ, tag),
                attr == null ? new ViAttributes() : attr, sendQ, recvQ);
    }

    Vi(MemorySegment handle, ViAttributes attr, ViCompletionQ sendQ, ViCompletionQ recvQ) throws ViException {
        this.lock = new ViLock(attr.isConfined() ? Thread.currentThread() : null);
        this.vi = handle;
        this.attrs = attr.copy();
        this.sendQ = sendQ;
        this.recvQ = recvQ;
        boolean direct;
        try {
            this.id = (int) (long) Native.VI_ID.invokeExact(vi);
            direct = (int) Native.VI_IS_DIRECT.invokeExact(vi) == 1;
        } catch (Throwable t) {
            throw Native.fatal(t);
        }
        int depth = attrs.getQueueDepth();
        int slot = attrs.getMaxMessageSize();
        long bytes = (long) depth * slot;
        MemorySegment[] sr = new MemorySegment[2];
        try {
            sr[0] = ViSetup.register(bytes);
            sr[1] = ViSetup.register(bytes);
        } catch (ViException e) {
            for (MemorySegment r : sr) {
                if (r != null) {
                    ViSetup.freeRegion(r);
                }
            }
            ViSetup.closeHandle(vi);
            arena.close();
            throw e;
        }
        long viA = vi.address();
        queues = new LibraryQueues(this, lock, viA, direct, attrs.getSpinMicros(), arena.allocate(Native.VI_SEG),
                arena.allocate(Native.VI_COMPLETION));
        copy = new CopyBuffers(queues, depth, slot, attrs.getInPlaceFrom(), sr[0], sr[1],
                ViSetup.regionMemory(arena, sr[0], bytes), ViSetup.regionMemory(arena, sr[1], bytes));
        bufs = new BufferSlots(queues, 2 * depth);
        boolean lendable = direct && sendQ == null && recvQ == null
                && attrs.getReliability() != ViAttributes.Reliability.RELIABLE_RECEPTION && !attrs.isStrictRnr()
                && !"false".equals(System.getProperty("unet.javia.lend"));
        lending = new Lending(this, lock, bufs, lendable ? new DirectPath(viA, arena, 2 * depth) : null, attrs);
        if (sendQ != null) {
            sendQ.attach(this);
        }
        if (recvQ != null) {
            recvQ.attach(this);
        }
    }

    /** @return the VI's id in its engine (what completion queues report) */
    public int id() {
        return id;
    }

    /** @return a copy of the attributes the VI was made with */
    public ViAttributes attributes() {
        return attrs.copy();
    }

    /**
     * Send {@code len} bytes of {@code b} from {@code off} (the paper's
     * {@code send}). The bytes are copied before it returns: {@code b} may
     * be reused at once. It blocks only while all of the VI's buffers carry
     * messages not yet complete; a failure of an earlier message (the VI
     * broken) is reported by the next call.
     *
     * @param b the array
     * @param off where the message starts
     * @param len its length (0 to the maximum message size)
     * @throws ViException when the VI is closed or broken, or off and len do not fit
     */
    public void send(byte[] b, int off, int len) throws ViException {
        send(b, off, len, len >= copy.inPlaceFrom);
    }

    /**
     * Send {@code len} bytes of {@code b} from {@code off}, handing the
     * array to the library for the duration of the call (Javia-I's second
     * mode: the paper pins the array): on a local VI the bytes go from the
     * array straight into the connection's ring, moved once, with no copy
     * into Javia's buffers. When that cannot happen now (the ring is full,
     * or the VI is between engines, whose engines read registered memory
     * only) the bytes are copied as {@link #send(byte[], int, int)} copies
     * them. Either way {@code b} may be reused when it returns.
     *
     * @param b the array
     * @param off where the message starts
     * @param len its length (0 to the maximum message size)
     * @throws ViException as {@link #send(byte[], int, int)}
     */
    public void sendInPlace(byte[] b, int off, int len) throws ViException {
        send(b, off, len, true);
    }

    private void send(byte[] b, int off, int len, boolean inPlace) throws ViException {
        CopyBuffers.checkRange(b, off, len);
        if (len > copy.slot) {
            throw new ViException("a message of " + len + " bytes is longer than this Vi's maxMessageSize of "
                    + copy.slot + " (ViAttributes.setMaxMessageSize)");
        }
        lock.lock();
        try {
            check();
            lending.unlend();
            if (copy.noSendFree()) {
                reapSends();
            }
            while (copy.noSendFree()) {
                waitSendUntil(Long.MAX_VALUE, INFINITE);
            }
            copy.send(copy.takeSend(), b, off, len, inPlace);
            reapSends();
        } finally {
            lock.unlock();
        }
    }

    /**
     * Wait at most {@code microseconds} ({@link #INFINITE}: forever) for
     * every message sent so far to complete (for the reliable levels: to
     * have arrived, or been placed).
     *
     * @param microseconds how long to wait
     * @throws ViTimeout when some are still outstanding
     * @throws ViException when the VI broke
     */
    public void flush(int microseconds) throws ViException {
        lock.lock();
        try {
            check();
            long deadline = LibraryQueues.deadline(microseconds);
            while (!copy.sendsDone()) {
                waitSendUntil(deadline, microseconds);
            }
        } finally {
            lock.unlock();
        }
    }

    /**
     * Wait at most {@code microseconds} for the next message and return it
     * in a new array of its length (the paper's allocating {@code recv}).
     * Not to be mixed with {@link #recvPost} on one VI.
     *
     * @param microseconds how long to wait ({@link #INFINITE}: forever)
     * @return the message
     * @throws ViTimeout when none came in time
     * @throws ViException when the VI is closed or broken, or tickets are posted
     */
    public byte[] recv(int microseconds) throws ViException {
        lock.lock();
        try {
            check();
            if (copy.ticketsPosted > 0 || bufs.recvPosted > 0) {
                throw new ViException("recv cannot take messages while " + (copy.ticketsPosted + bufs.recvPosted)
                        + " ViBATickets or ViBufferTickets are posted on this Vi (use recvWait or recvBufWait)");
            }
            lending.unlend();
            copy.postForRecv();
            waitRecv(microseconds);
            int s = (int) queues.doneId();
            int status = queues.doneStatus();
            int len = queues.doneLen();
            copy.recvTaken(s);
            if (status != 0) {
                ViException e = brokenBy(-status);
                failPosted();
                throw e;
            }
            return copy.copyOut(s, len);
        } finally {
            lock.unlock();
        }
    }

    /**
     * Post {@code t}'s array for the next message (the paper's asynchronous
     * receive): the message is copied into it by {@link #recvWait}, which
     * returns tickets in the order they were posted.
     *
     * @param t the ticket
     * @throws ViException when the VI is closed or broken, the ticket is
     *     already posted, or the VI's queue is full
     */
    public void recvPost(ViBATicket t) throws ViException {
        if (t == null) {
            throw new ViException("the ticket is null");
        }
        lock.lock();
        try {
            check();
            if (t.posted) {
                throw new ViException("the ticket is already posted");
            }
            if (copy.internalPosted > 0 || bufs.recvPosted > 0) {
                throw new ViException("recvPost cannot be mixed with recv or recvBufPost on one Vi while their"
                        + " buffers are posted");
            }
            if (copy.noRecvFree()) {
                throw new ViException("the receive queue is full: " + copy.recvSlots() + " tickets posted");
            }
            lending.unlend();
            copy.postFor(t);
        } finally {
            lock.unlock();
        }
    }

    /**
     * Wait at most {@code microsecs} ({@link #INFINITE}: forever) for the
     * next posted ticket to complete, and return it with the message in
     * its array.
     *
     * @param microsecs how long to wait
     * @return the ticket
     * @throws ViTimeout when none completed in time
     * @throws ViException when the VI is closed or broke (the ticket that
     *     completed with the error is marked with it), or none is posted
     */
    public ViBATicket recvWait(int microsecs) throws ViException {
        lock.lock();
        try {
            check();
            if (copy.ticketsPosted == 0) {
                throw new ViException("no ViBATicket is posted on this Vi");
            }
            waitRecv(microsecs);
            int s = (int) queues.doneId();
            int status = queues.doneStatus();
            int len = queues.doneLen();
            ViBATicket t = copy.ticketTaken(s);
            if (status != 0) {
                ViException e = brokenBy(-status);
                t.fail(broken);
                failPosted();
                throw e;
            }
            copy.copyInto(s, t, len);
            t.complete(len);
            return t;
        } finally {
            lock.unlock();
        }
    }

    /**
     * Post a send of {@code len} bytes of {@code t}'s buffer from {@code off}
     * (Javia-II: no copy; leave those bytes alone until the ticket is done).
     *
     * @param t a ticket of a buffer registered with this VI
     * @param off where the message starts in the buffer
     * @param len its length
     * @throws ViException when the VI is closed or broken, the ticket is
     *     posted, not registered with this VI, or off and len do not fit
     */
    public void sendBufPost(ViBufferTicket t, int off, int len) throws ViException {
        BufferSlots.checkTicket(t, this);
        if (off < 0 || len < 0 || off > t.buffer.size() - len || len > MAX_TRANSFER) {
            throw new ViException("offset " + off + " and length " + len + " do not fit a ViBuffer of "
                    + t.buffer.size() + " bytes (or exceed " + MAX_TRANSFER + ")");
        }
        lock.lock();
        try {
            check();
            if (lending.postSend(t, off, len)) {
                return;
            }
            lending.unlend();
            int k = bufs.take(t);
            int r = bufs.postSend(k, t, off, len);
            if (r != 0) {
                bufs.release(k);
                throw Native.failure("posting a buffer send", r);
            }
            bufs.sendsInLibrary++;
        } finally {
            lock.unlock();
        }
    }

    /**
     * Wait at most {@code microseconds} ({@link #INFINITE}: forever) for the
     * next buffer send to complete, in the order they were posted.
     *
     * @param microseconds how long to wait
     * @return its ticket, done
     * @throws ViTimeout when none completed in time
     * @throws ViException when the VI broke (the ticket is marked with why), or none is posted
     */
    public ViBufferTicket sendBufWait(int microseconds) throws ViException {
        lock.lock();
        try {
            if (lending.isLent()) {
                // Nothing of the VI's is outstanding in the library: what
                // is done is here, or waits for the peer to read it.
                ViBufferTicket t = lending.waitSentLent(microseconds);
                if (t != null) {
                    return t;
                }
            }
            if (bufs.sendDone.isEmpty() && broken == null && !closed) {
                // The common case, the oldest send already complete: taken
                // and handed back at once, not through bufs.sendDone.
                ViBufferTicket t = pollBufSend();
                if (t != null) {
                    return t;
                }
            }
            long deadline = LibraryQueues.deadline(microseconds);
            while (true) {
                ViBufferTicket done = bufs.sendDone.pollFirst();
                if (done != null) {
                    if (done.getError() != null) {
                        throw new ViException("the Vi is broken: " + done.getError(), done.getError());
                    }
                    return done;
                }
                check();
                if (!bufs.anySendPosted()) {
                    throw new ViException("no ViBufferTicket send is posted on this Vi");
                }
                ViException e = takeSend(deadline, microseconds);
                if (e != null && bufs.sendDone.isEmpty()) {
                    throw e;
                }
            }
        } finally {
            lock.unlock();
        }
    }

    /**
     * One poll of the send queue: the buffer ticket of a send completed
     * well, done; null when nothing completed or what did is another kind
     * of completion (routed as {@link #routeSend} routes it, for the
     * caller's general path to find).
     */
    private ViBufferTicket pollBufSend() {
        if (queues.sendDone() != 1) {
            return null;
        }
        long id = queues.doneId();
        if ((id & BufferSlots.BUF) == 0 || queues.doneStatus() != 0) {
            routeSend();
            return null;
        }
        ViBufferTicket t = bufs.sendTaken(id);
        t.complete(queues.doneLen());
        return t;
    }

    /**
     * Post {@code t}'s buffer from {@code off} to its end for the next
     * message (Javia-II: the message lands in the buffer, no copy).
     *
     * @param t a ticket of a buffer registered with this VI
     * @param off where the message goes in the buffer
     * @throws ViException when the VI is closed or broken, the ticket is
     *     posted or not registered with this VI, or off is outside the buffer
     */
    public void recvBufPost(ViBufferTicket t, int off) throws ViException {
        BufferSlots.checkTicket(t, this);
        if (off < 0 || off > t.buffer.size()) {
            throw new ViException("offset " + off + " is outside a ViBuffer of " + t.buffer.size() + " bytes");
        }
        lock.lock();
        try {
            check();
            if (copy.ticketsPosted > 0 || copy.internalPosted > 0) {
                throw new ViException("recvBufPost cannot be mixed with recvPost or recv on one Vi while their"
                        + " buffers are posted");
            }
            if (lending.postRecv(t, off)) {
                return;
            }
            lending.unlend();
            int k = bufs.take(t);
            bufs.off[k] = off;
            int r = bufs.postRecv(k, t, off);
            if (r != 0) {
                bufs.release(k);
                throw Native.failure("posting a buffer receive", r);
            }
            bufs.recvPosted++;
        } finally {
            lock.unlock();
        }
    }

    /**
     * Wait at most {@code microseconds} ({@link #INFINITE}: forever) for the
     * next buffer receive to complete, in the order they were posted.
     *
     * @param microseconds how long to wait
     * @return its ticket, done, with the message's length
     * @throws ViTimeout when none completed in time
     * @throws ViException when the VI broke (the ticket is marked with why), or none is posted
     */
    public ViBufferTicket recvBufWait(int microseconds) throws ViException {
        lock.lock();
        try {
            check();
            if (bufs.recvPosted == 0) {
                throw new ViException("no ViBufferTicket receive is posted on this Vi");
            }
            if (lending.holds()) {
                ViBufferTicket t = lending.takeHeld(microseconds);
                if (t != null) {
                    return t;
                }
            }
            lending.unlend();
            if (bufs.recvPosted == 0) {
                throw new ViException("no receive is posted on this Vi any more (another thread took it)");
            }
            waitRecv(microseconds);
            long id = queues.doneId();
            int status = queues.doneStatus();
            int len = queues.doneLen();
            ViBufferTicket t = bufs.recvTaken(id);
            if (status != 0) {
                ViException e = brokenBy(-status);
                t.fail(broken);
                failPosted();
                throw e;
            }
            t.complete(len);
            return t;
        } finally {
            lock.unlock();
        }
    }

    /**
     * Unregister {@code t} unless it is posted (under this VI's lock, so
     * that no post slips in between): false when it is posted.
     */
    boolean unregisterIfIdle(ViBufferTicket t) {
        lock.lock();
        try {
            if (t.posted) {
                return false;
            }
            t.registered = false;
            return true;
        } finally {
            lock.unlock();
        }
    }

    /** Whether the direct path is lent to Javia now (for the tests). */
    boolean pathLent() {
        lock.lock();
        try {
            return lending.isLent();
        } finally {
            lock.unlock();
        }
    }

    /** The address of the VI's handle, as the library's data path calls take it (for the tests). */
    long handleAddress() {
        return vi.address();
    }

    /**
     * The library can lend the path: no send of the VI's outstanding in it
     * (its completion untaken), no receive but buffer receives (which come
     * over with the path).
     */
    boolean libraryIdle() {
        return bufs.sendsInLibrary == 0 && copy.ticketsPosted == 0 && copy.internalPosted == 0
                && copy.sendsDone();
    }

    /**
     * Close the VI: messages sent are given up to 5 s to complete, then the
     * peer's VI breaks (peer gone), tickets still posted complete with
     * {@code UNET_VI_CLOSED}, and the VI's buffers go back to the engine.
     * Closing twice does nothing.
     */
    @Override
    public void close() {
        lock.lock();
        try {
            if (closed) {
                return;
            }
            lending.unlendForClose();
            if (broken == null && !copy.sendsDone()) {
                // Messages sent go out before the VI closes (send returns
                // once they are copied): wait for them, a while at most.
                try {
                    flush(CLOSE_FLUSH_US);
                } catch (ViException e) {
                    // Broken or too slow: closing completes them with an error.
                }
            }
            closed = true;
            copy.failClosed();
            bufs.failClosed();
            if (sendQ != null) {
                sendQ.detach(this);
            }
            if (recvQ != null) {
                recvQ.detach(this);
            }
            ViSetup.closeHandle(vi);
            // No access to the buffers after this (the arena bounds them),
            // then they go back to the engine.
            arena.close();
            ViSetup.freeRegion(copy.sendRegion);
            ViSetup.freeRegion(copy.recvRegion);
        } finally {
            lock.unlock();
        }
    }

    // -- internals (under the lock) -----------------------------------------

    /** Throws unless the VI is usable: closed, or broken (every ticket posted then fails). */
    void check() throws ViException {
        if (closed) {
            throw new ViException("the Vi is closed");
        }
        if (broken != null) {
            failPosted();
            throw new ViException("the Vi is broken: " + broken, broken);
        }
    }

    /**
     * A broken VI completes nothing more: every ticket still posted is
     * done, with the reason (VIA completes every outstanding descriptor
     * with the error).
     */
    private void failPosted() {
        copy.failAll(broken);
        bufs.failAll(broken);
        lending.failAll(broken);
        bufs.recvPosted = 0;
    }

    /** Enter the error state for VI error {@code code}; the exception to throw. */
    private ViException brokenBy(int code) {
        if (broken == null) {
            broken = Native.viErrorName(code);
        }
        return new ViException("the Vi is broken: " + broken, broken);
    }

    /** Take every completed send back: its buffer is free again. */
    private void reapSends() throws ViException {
        ViException failed = null;
        while (queues.sendDone() == 1) {
            ViException e = routeSend();
            if (e != null && failed == null) {
                failed = e;
            }
        }
        if (failed != null) {
            throw failed;
        }
    }

    /** Wait for one send to complete, and take it back. */
    private void waitSendUntil(long deadline, int microseconds) throws ViException {
        if (!queues.waitDone(true, deadline, microseconds)) {
            return;
        }
        ViException e = routeSend();
        if (e != null) {
            throw e;
        }
        reapSends();
    }

    /**
     * Wait for one send to complete and route it; the failure it carried,
     * if any (not thrown: the caller decides).
     */
    private ViException takeSend(long deadline, int microseconds) throws ViException {
        return queues.waitDone(true, deadline, microseconds) ? routeSend() : null;
    }

    /**
     * The send completion last taken: a Javia-I buffer is free again,
     * a buffer ticket is done (and queued for sendBufWait). Its failure, if
     * it failed.
     */
    private ViException routeSend() {
        long id = queues.doneId();
        int status = queues.doneStatus();
        int len = queues.doneLen();
        ViException e = status != 0 ? brokenBy(-status) : null;
        if ((id & BufferSlots.BUF) != 0) {
            ViBufferTicket t = bufs.sendTaken(id);
            if (e != null) {
                t.fail(broken);
            } else {
                t.complete(len);
            }
            bufs.sendDone.addLast(t);
            return e;
        }
        copy.freeSend((int) id);
        return e;
    }

    /**
     * Wait for the next receive completion (taken in {@link #queues}):
     * polls with the lock given up between polls for the spin time, then
     * sleeps in the library in slices, giving the lock up between them.
     */
    private void waitRecv(int microseconds) throws ViException {
        if (!queues.waitDone(false, LibraryQueues.deadline(microseconds), microseconds)) {
            throw new ViException("no receive is posted on this Vi any more (another thread took it)");
        }
    }
}
