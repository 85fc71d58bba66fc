package unet.javia;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayDeque;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

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

    /** Polls between two reads of the clock while a wait spins. */
    private static final int CLOCK_EVERY = 16;

    /**
     * Pauses between a receive's looks at the lent ring. A look shares
     * the line the producer writes next, which its write must take back
     * (likely). Measured on 64 B round trips, both ends switching between
     * one pause and two every other round trip: 0.955-0.966x when the two
     * cores are far apart, 0.95-1.05x when near.
     */
    private static final int RECV_PAUSES = 2;

    /**
     * Pauses between a send's looks at the peer's placed count, a line it
     * writes after every message it places by reference. Measured on 4 KiB
     * bursts, both ends switching between one pause and four after every
     * burst: 1.16x the bandwidth with the cores far apart (where the
     * receiver is the limit and the sender waits for it), 1.00x near; two
     * pauses, 1.09-1.12x.
     */
    private static final int SEND_PAUSES = 4;

    /** How long a wait holds the lock at a time while it sleeps. */
    private static final long SLICE_US = 200;

    /**
     * How long a wait on the lent path naps while sends wait for room in
     * the ring (nobody wakes it when room comes), as the library's does.
     */
    private static final long ROOM_NAP_US = 50;

    private final ViLock lock;
    private final Arena arena = Arena.ofShared();
    private final MemorySegment vi;
    private final int id;
    private final ViAttributes attrs;
    private final ViCompletionQ sendQ;
    private final ViCompletionQ recvQ;

    // Javia-I's buffers: `depth` slots of `slot` bytes each way.
    private final int slot;
    /** Javia-I sends of this many bytes or more go in place. */
    private final int inPlaceFrom;
    private final MemorySegment sendRegion;
    private final MemorySegment recvRegion;
    private final MemorySegment sendMem;
    private final MemorySegment recvMem;
    private final int[] sendFree;
    private int sendFreeN;
    private final int[] recvFree;
    private int recvFreeN;
    /** The ticket each receive slot is posted for; null: posted for recv(). */
    private final ViBATicket[] recvTickets;
    private int ticketsPosted;
    private int internalPosted;

    // Javia-II: buffer tickets posted, by index; a descriptor's id is
    // BUF | index.
    private static final long BUF = 1L << 32;
    private final ViBufferTicket[] bufTickets;
    /** The offset a buffer receive was posted at, by index. */
    private final int[] bufOff;
    private final int[] bufFree;
    private int bufFreeN;
    private int bufRecvPosted;
    /** Buffer sends posted in the library and not taken back yet. */
    private int bufSendsInLibrary;
    /** Buffer sends completed, not yet returned by sendBufWait. */
    private final ArrayDeque<ViBufferTicket> sendBufDone;

    // Scratch structures for the downcalls (used under the lock).
    private final MemorySegment seg;
    private final MemorySegment comp;
    /**
     * The addresses of the VI handle, {@code seg} and {@code comp}, as the
     * data path's calls take them: valid until {@link #close} (under the
     * lock, as every call that uses them).
     */
    private final long viA;
    /**
     * Messages go straight between the two processes (a local VI), not
     * through the engines: a wait then spins here, polling; on the
     * engines' path it waits in the library at once, whose spin looks at
     * one word between polls (a poll of an engine VI costs its engine
     * work: polling it in a loop made a round trip 2.5 times as long).
     */
    private final boolean direct;
    private final long segA;
    private final long compA;

    private boolean closed;
    /** The VI error it broke with, once broken. */
    private String broken;

    /**
     * The VI's direct path, lent to Javia whenever no send of the VI's is
     * outstanding in the library and no receive but buffer receives
     * ({@link DirectPath}; those come over with it): Javia-II's calls then
     * read and write the connection's rings themselves, with no call into
     * the library for a message. Null for a VI that cannot lend
     * it (between engines, with a completion queue, of reliable reception,
     * strict about receives not posted) or with lending turned off (the
     * system property {@code unet.javia.lend=false}).
     */
    private final DirectPath path;
    /** The index mask of the rings below ({@link #held}, {@link #unplaced}, {@link #waiting}). */
    private final int ringMask;
    /**
     * Buffer receives posted while the path is lent, oldest first, with
     * their offsets: posted in the library when the path goes back.
     */
    private final ViBufferTicket[] held;
    private final int[] heldOff;
    private int heldHead;
    private int heldN;
    /**
     * Buffer sends on the lent path that wait for the peer to read them
     * (sent by reference), or sent behind such a one, oldest first: each
     * completes once the peer has placed as many messages as its number.
     */
    private final ViBufferTicket[] unplaced;
    private final int[] unplacedLen;
    private final long[] unplacedSeq;
    private int unplacedHead;
    private int unplacedN;
    /** The number of the last send by reference on the lent path. */
    private long lastRefSeq;
    /**
     * Buffer sends posted on the lent path that are not in the ring yet
     * (it had no room), oldest first, with their offsets and lengths: they
     * go in as the peer makes room, before any later send.
     */
    private final ViBufferTicket[] waiting;
    private final int[] waitingOff;
    private final int[] waitingLen;
    private int waitingHead;
    private int waitingN;

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
        this(connect(mach, attr == null ? new ViAttributes() : attr, sendQ, recvQ, tag),
                attr == null ? new ViAttributes() : attr, sendQ, recvQ);
    }

    Vi(MemorySegment handle, ViAttributes attr, ViCompletionQ sendQ, ViCompletionQ recvQ) throws ViException {
        this.lock = new ViLock(attr.isConfined() ? Thread.currentThread() : null);
        this.vi = handle;
        this.attrs = attr.copy();
        this.sendQ = sendQ;
        this.recvQ = recvQ;
        try {
            this.id = (int) (long) Native.VI_ID.invokeExact(vi);
            this.direct = (int) Native.VI_IS_DIRECT.invokeExact(vi) == 1;
        } catch (Throwable t) {
            throw Native.fatal(t);
        }
        int depth = attrs.getQueueDepth();
        slot = attrs.getMaxMessageSize();
        inPlaceFrom = attrs.getInPlaceFrom();
        long bytes = (long) depth * slot;
        MemorySegment[] sr = new MemorySegment[2];
        try {
            sr[0] = register(bytes);
            sr[1] = register(bytes);
        } catch (ViException e) {
            for (MemorySegment r : sr) {
                if (r != null) {
                    freeRegion(r);
                }
            }
            closeHandle();
            arena.close();
            throw e;
        }
        sendRegion = sr[0];
        recvRegion = sr[1];
        sendMem = regionMemory(sendRegion, bytes);
        recvMem = regionMemory(recvRegion, bytes);
        sendFree = new int[depth];
        recvFree = new int[depth];
        for (int i = 0; i < depth; i++) {
            sendFree[i] = depth - 1 - i;
            recvFree[i] = depth - 1 - i;
        }
        sendFreeN = depth;
        recvFreeN = depth;
        recvTickets = new ViBATicket[depth];
        bufTickets = new ViBufferTicket[2 * depth];
        bufOff = new int[2 * depth];
        bufFree = new int[2 * depth];
        for (int i = 0; i < bufFree.length; i++) {
            bufFree[i] = bufFree.length - 1 - i;
        }
        bufFreeN = bufFree.length;
        sendBufDone = new ArrayDeque<>(2 * depth);
        seg = arena.allocate(Native.VI_SEG);
        comp = arena.allocate(Native.VI_COMPLETION);
        viA = vi.address();
        segA = seg.address();
        compA = comp.address();
        boolean lendable = direct && sendQ == null && recvQ == null
                && attrs.getReliability() != ViAttributes.Reliability.RELIABLE_RECEPTION && !attrs.isStrictRnr()
                && !"false".equals(System.getProperty("unet.javia.lend"));
        path = lendable ? new DirectPath(viA, arena, 2 * depth) : null;
        // Rings of a power of two at least twice the depth: an index wraps
        // with a mask (a division on every message otherwise).
        int ring = Integer.highestOneBit(2 * depth - 1) << 1;
        ringMask = ring - 1;
        held = new ViBufferTicket[ring];
        heldOff = new int[ring];
        unplaced = new ViBufferTicket[ring];
        unplacedLen = new int[ring];
        unplacedSeq = new long[ring];
        waiting = new ViBufferTicket[ring];
        waitingOff = new int[ring];
        waitingLen = new int[ring];
        if (sendQ != null) {
            sendQ.attach(this);
        }
        if (recvQ != null) {
            recvQ.attach(this);
        }
    }

    /** Fill a native {@code unet_vi_attrs} from {@code a}. */
    static MemorySegment nativeAttrs(Arena arena, ViAttributes a, ViCompletionQ sendQ, ViCompletionQ recvQ)
            throws ViException {
        MemorySegment na = arena.allocate(Native.VI_ATTRS);
        try {
            int r = (int) Native.ATTRS_INIT.invokeExact(na);
            if (r != 0) {
                throw Native.failure("unet_vi_attrs_init", r);
            }
        } catch (ViException e) {
            throw e;
        } catch (Throwable t) {
            throw Native.fatal(t);
        }
        na.set(JAVA_INT, 0, a.getReliability().ordinal());
        na.set(JAVA_INT, 4, a.isStrictRnr() ? 1 : 0);
        na.set(JAVA_INT, 8, a.getQueueDepth());
        na.set(JAVA_INT, 12, a.getQueueDepth());
        na.set(JAVA_INT, 16, a.getSpinMicros());
        na.set(JAVA_INT, 20, a.getBreakTimeoutMillis());
        na.set(ADDRESS, 24, sendQ == null ? MemorySegment.NULL : sendQ.cq);
        na.set(ADDRESS, 32, recvQ == null ? MemorySegment.NULL : recvQ.cq);
        return na;
    }

    private static MemorySegment connect(ViAddress mach, ViAttributes attr, ViCompletionQ sendQ,
            ViCompletionQ recvQ, int tag) throws ViException {
        if (mach == null) {
            throw new ViException("the ViAddress is null");
        }
        MemorySegment session = Engine.session();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment na = nativeAttrs(a, attr, sendQ, recvQ);
            MemorySegment host = mach.isLocal() ? MemorySegment.NULL : a.allocateFrom(mach.toString());
            MemorySegment out = a.allocate(ADDRESS);
            int r = (int) Native.CONNECT.invokeExact(session, host, (long) tag, na, -1L, out);
            if (r != 0) {
                throw Native.failure("connecting a VI to tag " + tag + " at " + mach, r);
            }
            return out.get(ADDRESS, 0);
        } catch (ViException e) {
            throw e;
        } catch (Throwable t) {
            throw Native.fatal(t);
        }
    }

    private static MemorySegment register(long bytes) throws ViException {
        MemorySegment session = Engine.session();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(ADDRESS);
            int r = (int) Native.REGISTER_MEMORY.invokeExact(session, bytes, out);
            if (r != 0) {
                throw Native.failure("registering " + bytes + " bytes", r);
            }
            return out.get(ADDRESS, 0);
        } catch (ViException e) {
            throw e;
        } catch (Throwable t) {
            throw Native.fatal(t);
        }
    }

    /** The memory of region {@code r}, valid until this VI's arena closes. */
    // Restricted: a segment from a native address. Sound: the region is
    // `bytes` long (registered so above) and stays mapped until it is freed
    // in close(), after the arena that bounds every access is closed.
    @SuppressWarnings("restricted")
    private MemorySegment regionMemory(MemorySegment r, long bytes) {
        try {
            MemorySegment p = (MemorySegment) Native.REGION_PTR.invokeExact(r);
            return p.reinterpret(bytes, arena, null);
        } catch (Throwable t) {
            throw Native.fatal(t);
        }
    }

    private static void freeRegion(MemorySegment r) {
        try {
            Native.REGION_FREE.invokeExact(r);
        } catch (Throwable t) {
            throw Native.fatal(t);
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
        send(b, off, len, len >= inPlaceFrom);
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
        checkRange(b, off, len);
        if (len > slot) {
            throw new ViException("a message of " + len + " bytes is longer than this Vi's maxMessageSize of "
                    + slot + " (ViAttributes.setMaxMessageSize)");
        }
        lock.lock();
        try {
            check();
            unlend();
            if (sendFreeN == 0) {
                reapSends();
            }
            while (sendFreeN == 0) {
                waitSend(INFINITE);
            }
            int s = sendFree[--sendFreeN];
            if (!inPlace || !sendCopied(s, b, off, len)) {
                long at = (long) s * slot;
                MemorySegment.copy(b, off, sendMem, JAVA_BYTE, at, len);
                postSend(s, sendRegion, at, len);
            }
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
            long deadline = deadline(microseconds);
            while (sendFreeN < sendFree.length) {
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
            if (ticketsPosted > 0 || bufRecvPosted > 0) {
                throw new ViException("recv cannot take messages while " + (ticketsPosted + bufRecvPosted)
                        + " ViBATickets or ViBufferTickets are posted on this Vi (use recvWait or recvBufWait)");
            }
            unlend();
            while (recvFreeN > 0) {
                int s = recvFree[--recvFreeN];
                recvTickets[s] = null;
                postRecv(s, slot);
                internalPosted++;
            }
            waitRecv(microseconds);
            int s = (int) comp.get(JAVA_LONG, 0);
            int status = comp.get(JAVA_INT, 8);
            int len = comp.get(JAVA_INT, 12);
            internalPosted--;
            recvFree[recvFreeN++] = s;
            if (status != 0) {
                ViException e = brokenBy(-status);
                failPosted();
                throw e;
            }
            byte[] b = new byte[len];
            MemorySegment.copy(recvMem, JAVA_BYTE, (long) s * slot, b, 0, len);
            return b;
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
            if (internalPosted > 0 || bufRecvPosted > 0) {
                throw new ViException("recvPost cannot be mixed with recv or recvBufPost on one Vi while their"
                        + " buffers are posted");
            }
            if (recvFreeN == 0) {
                throw new ViException("the receive queue is full: " + recvFree.length + " tickets posted");
            }
            unlend();
            int s = recvFree[--recvFreeN];
            recvTickets[s] = t;
            t.reset();
            t.posted = true;
            ticketsPosted++;
            postRecv(s, Math.min(slot, t.room()));
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
            if (ticketsPosted == 0) {
                throw new ViException("no ViBATicket is posted on this Vi");
            }
            waitRecv(microsecs);
            int s = (int) comp.get(JAVA_LONG, 0);
            int status = comp.get(JAVA_INT, 8);
            int len = comp.get(JAVA_INT, 12);
            ViBATicket t = recvTickets[s];
            recvTickets[s] = null;
            recvFree[recvFreeN++] = s;
            ticketsPosted--;
            if (status != 0) {
                ViException e = brokenBy(-status);
                t.fail(broken);
                failPosted();
                throw e;
            }
            MemorySegment.copy(recvMem, JAVA_BYTE, (long) s * slot, t.getByteArray(), t.getOffset(), len);
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
        checkTicket(t);
        if (off < 0 || len < 0 || off > t.buffer.size() - len || len > MAX_TRANSFER) {
            throw new ViException("offset " + off + " and length " + len + " do not fit a ViBuffer of "
                    + t.buffer.size() + " bytes (or exceed " + MAX_TRANSFER + ")");
        }
        lock.lock();
        try {
            check();
            // Sends waiting for the peer are bounded as the library's queue
            // bounds them: past that, the library's answer.
            if (path != null && unplacedN + waitingN < attrs.getQueueDepth() && lent()) {
                checkPostable(t);
                flushWaiting();
                t.reset();
                int put = waitingN > 0 ? NO_ROOM : putLent(t, off, len);
                if (put == NO_ROOM) {
                    // Posted: it goes into the ring once the peer makes room.
                    int i = (waitingHead + waitingN) & ringMask;
                    waiting[i] = t;
                    waitingOff[i] = off;
                    waitingLen[i] = len;
                    waitingN++;
                    t.posted = true;
                    return;
                }
                if (put == PUT) {
                    return;
                }
            }
            unlend();
            int k = takeBufSlot(t);
            int r = postBufSend(k, t, off, len);
            if (r != 0) {
                releaseBufSlot(k);
                throw Native.failure("posting a buffer send", r);
            }
            bufSendsInLibrary++;
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
            if (path != null && path.isLent) {
                // Nothing of the VI's is outstanding in the library: what
                // is done is here, or waits for the peer to read it.
                ViBufferTicket t = waitSentLent(microseconds);
                if (t != null) {
                    return t;
                }
            }
            if (sendBufDone.isEmpty() && broken == null && !closed) {
                // The common case, the oldest send already complete: taken
                // and handed back at once, not through sendBufDone.
                ViBufferTicket t = pollBufSend();
                if (t != null) {
                    return t;
                }
            }
            long deadline = deadline(microseconds);
            while (true) {
                ViBufferTicket done = sendBufDone.pollFirst();
                if (done != null) {
                    if (done.getError() != null) {
                        throw new ViException("the Vi is broken: " + done.getError(), done.getError());
                    }
                    return done;
                }
                check();
                if (!anyBufSendPosted()) {
                    throw new ViException("no ViBufferTicket send is posted on this Vi");
                }
                ViException e = takeSend(deadline, microseconds);
                if (e != null && sendBufDone.isEmpty()) {
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
        if (sendDone() != 1) {
            return null;
        }
        long id = comp.get(JAVA_LONG, 0);
        if ((id & BUF) == 0 || comp.get(JAVA_INT, 8) != 0) {
            routeSend();
            return null;
        }
        int k = (int) (id & ~BUF);
        ViBufferTicket t = bufTickets[k];
        releaseBufSlot(k);
        bufSendsInLibrary--;
        t.complete(comp.get(JAVA_INT, 12));
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
        checkTicket(t);
        if (off < 0 || off > t.buffer.size()) {
            throw new ViException("offset " + off + " is outside a ViBuffer of " + t.buffer.size() + " bytes");
        }
        lock.lock();
        try {
            check();
            if (ticketsPosted > 0 || internalPosted > 0) {
                throw new ViException("recvBufPost cannot be mixed with recvPost or recv on one Vi while their"
                        + " buffers are posted");
            }
            if (lent()) {
                checkPostable(t);
                if (bufRecvPosted < attrs.getQueueDepth()) {
                    // Held here until a message comes (or the path goes back).
                    int i = (heldHead + heldN) & ringMask;
                    held[i] = t;
                    heldOff[i] = off;
                    heldN++;
                    t.reset();
                    t.posted = true;
                    bufRecvPosted++;
                    return;
                }
            }
            unlend();
            int k = takeBufSlot(t);
            bufOff[k] = off;
            int r = postBufRecv(k, t, off);
            if (r != 0) {
                releaseBufSlot(k);
                throw Native.failure("posting a buffer receive", r);
            }
            bufRecvPosted++;
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
            if (bufRecvPosted == 0) {
                throw new ViException("no ViBufferTicket receive is posted on this Vi");
            }
            if (heldN > 0) {
                ViBufferTicket t = takeHeld(microseconds);
                if (t != null) {
                    return t;
                }
            }
            unlend();
            if (bufRecvPosted == 0) {
                throw new ViException("no receive is posted on this Vi any more (another thread took it)");
            }
            waitRecv(microseconds);
            long id = comp.get(JAVA_LONG, 0);
            int status = comp.get(JAVA_INT, 8);
            int len = comp.get(JAVA_INT, 12);
            int k = (int) (id & ~BUF);
            ViBufferTicket t = bufTickets[k];
            releaseBufSlot(k);
            bufRecvPosted--;
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

    /**
     * Whether the direct path is lent here now, borrowing it if the
     * library can lend it ({@link #libraryIdle}).
     */
    private boolean lent() {
        if (path == null) {
            return false;
        }
        if (path.isLent) {
            return true;
        }
        if (broken != null || closed || !libraryIdle() || !path.lend()) {
            return false;
        }
        // The receives the library had posted are held here now, in order.
        for (int i = 0; i < path.lentRecvs(); i++) {
            long id = path.lentRecvId(i);
            if ((id & BUF) == 0) {
                throw new AssertionError("Javia: the library handed over a receive it was not given: " + id);
            }
            int k = (int) (id & ~BUF);
            int h = (heldHead + heldN) & ringMask;
            held[h] = bufTickets[k];
            heldOff[h] = bufOff[k];
            heldN++;
            bufTickets[k] = null;
            bufFree[bufFreeN++] = k;
        }
        return true;
    }

    /** Whether the direct path is lent to Javia now (for the tests). */
    boolean pathLent() {
        lock.lock();
        try {
            return path != null && path.isLent;
        } finally {
            lock.unlock();
        }
    }

    /**
     * The library can lend the path: no send of the VI's outstanding in it
     * (its completion untaken), no receive but buffer receives (which come
     * over with the path).
     */
    private boolean libraryIdle() {
        return bufSendsInLibrary == 0 && ticketsPosted == 0 && internalPosted == 0
                && sendFreeN == sendFree.length;
    }

    /**
     * Hand the lent path back before a call into the library's data path;
     * the receives held here are posted there, in order.
     */
    private void unlend() throws ViException {
        if (path == null || !path.isLent) {
            return;
        }
        // Sends the peer has not read yet go back with the path, under
        // slots of their own, for the library to complete.
        int n = unplacedN;
        for (int i = 0; i < n; i++) {
            ViBufferTicket t = unplaced[unplacedHead];
            int k = bufFree[--bufFreeN];
            bufTickets[k] = t;
            MemorySegment e = path.unplaced.asSlice(i * DirectPath.UNPLACED.byteSize(), DirectPath.UNPLACED);
            e.set(JAVA_LONG, 0, BUF | k);
            e.set(JAVA_LONG, 8, unplacedLen[unplacedHead]);
            e.set(JAVA_LONG, 16, unplacedSeq[unplacedHead]);
            unplaced[unplacedHead] = null;
            unplacedHead = (unplacedHead + 1) & ringMask;
        }
        unplacedN = 0;
        bufSendsInLibrary += n;
        path.giveBack(n);
        // Sends that waited for room: posted in the library, in order.
        while (waitingN > 0) {
            ViBufferTicket t = waiting[waitingHead];
            int off = waitingOff[waitingHead];
            int len = waitingLen[waitingHead];
            waiting[waitingHead] = null;
            waitingHead = (waitingHead + 1) & ringMask;
            waitingN--;
            int k = bufFree[--bufFreeN];
            bufTickets[k] = t;
            int r = postBufSend(k, t, off, len);
            if (r != 0) {
                releaseBufSlot(k);
                t.fail("UNET_VI_CLOSED");
                throw Native.failure("posting a buffer send", r);
            }
            bufSendsInLibrary++;
        }
        while (heldN > 0) {
            ViBufferTicket t = held[heldHead];
            int off = heldOff[heldHead];
            held[heldHead] = null;
            heldHead = (heldHead + 1) & ringMask;
            heldN--;
            // Already posted and counted: only the library learns of it now.
            int k = bufFree[--bufFreeN];
            bufTickets[k] = t;
            bufOff[k] = off;
            int r = postBufRecv(k, t, off);
            if (r != 0) {
                // Cannot happen (the library's queue has room for every
                // buffer ticket Javia posts); fail it rather than lose it.
                releaseBufSlot(k);
                bufRecvPosted--;
                t.fail("UNET_VI_CLOSED");
                throw Native.failure("posting a buffer receive", r);
            }
        }
    }

    /** As {@link #unlend}, on the way to closing: a failure there changes nothing of the close. */
    private void unlendForClose() {
        try {
            unlend();
        } catch (ViException e) {
            // The close completes whatever is still posted.
        }
    }

    /**
     * The next message into the oldest receive held here, from the lent
     * path: spins as a wait does, then sleeps on the ring; null when the
     * next record is for the library (the path goes back; the caller
     * waits there).
     */
    private ViBufferTicket takeHeld(int microseconds) throws ViException {
        long spinEnd = 0;
        long deadline = 0;
        int polls = 0;
        while (true) {
            if (waitingN > 0) {
                flushWaiting();
            }
            ViBufferTicket t = held[heldHead];
            int off = heldOff[heldHead];
            int n = path.poll(t.memory, off, Math.min(t.buffer.size() - off, MAX_TRANSFER));
            if (n >= 0) {
                held[heldHead] = null;
                heldHead = (heldHead + 1) & ringMask;
                heldN--;
                bufRecvPosted--;
                t.complete(n);
                return t;
            }
            if (n == DirectPath.OTHER || path.peerClosed()) {
                unlend();
                return null;
            }
            // The clock only after CLOCK_EVERY empty polls (at once for a
            // wait of 0): a message that comes during a read of it waits.
            if (microseconds != 0 && ++polls % CLOCK_EVERY != 0) {
                pause(RECV_PAUSES);
                continue;
            }
            if (deadline == 0) {
                long now = System.nanoTime();
                spinEnd = now + attrs.getSpinMicros() * 1000L;
                deadline = microseconds < 0 ? Long.MAX_VALUE : now + microseconds * 1000L;
            }
            int r = pauseLent(spinEnd, deadline, microseconds, 0);
            if (r != GO_ON) {
                check();
                if (r == PATH_BACK || heldN == 0) {
                    return null;
                }
            }
        }
    }

    /** {@link #putLent}: in the ring. */
    private static final int PUT = 0;
    /** {@link #putLent}: no room in the ring now. */
    private static final int NO_ROOM = 1;
    /** {@link #putLent}: not a send the lent path makes (the library's). */
    private static final int NOT_HERE = 2;

    /**
     * Put a buffer send into the lent ring: a small one copied, a large
     * one as a reference to the buffer (by copy if the buffer cannot be
     * granted to the peer and the message fits a record).
     */
    private int putLent(ViBufferTicket t, int off, int len) {
        if (path.peerClosed()) {
            return NOT_HERE;
        }
        if (len < path.pullMin || !granted(t)) {
            if (!path.fitsRecord(len)) {
                return NOT_HERE;
            }
            if (!path.trySend(t.memory, off, len)) {
                return NO_ROOM;
            }
            // In the ring: done at once, as the library's direct path
            // completes a small send, unless a large one before it is not
            // read yet.
            sentLent(t, len, 0);
            return PUT;
        }
        long seq = path.trySendRef(t.buffer.regionHandle(), off, len);
        if (seq == 0) {
            return NO_ROOM;
        }
        // The peer reads it from the buffer: done once it has.
        sentLent(t, len, seq);
        return PUT;
    }

    /** Put the sends waiting for room into the lent ring, as far as it has room. */
    private void flushWaiting() {
        while (waitingN > 0) {
            ViBufferTicket t = waiting[waitingHead];
            int r = putLent(t, waitingOff[waitingHead], waitingLen[waitingHead]);
            if (r != PUT) {
                // NOT_HERE: the peer went; the library finds it once the
                // path goes back.
                return;
            }
            waiting[waitingHead] = null;
            waitingHead = (waitingHead + 1) & ringMask;
            waitingN--;
        }
    }

    /** Whether {@code t}'s buffer is granted to the peer, asking the library the first time. */
    private boolean granted(ViBufferTicket t) {
        if (t.grant == 0) {
            t.grant = path.grant(t.buffer.region()) ? (byte) 1 : (byte) 2;
        }
        return t.grant == 1;
    }

    /**
     * A buffer send went into the lent ring: done at once, or, sent by
     * reference ({@code seq}, its number) or behind one the peer has not
     * read, once the peer has placed as many messages.
     */
    private void sentLent(ViBufferTicket t, int len, long seq) {
        if (seq == 0 && unplacedN == 0) {
            t.complete(len);
            sendBufDone.addLast(t);
            return;
        }
        t.posted = true;
        if (seq != 0) {
            lastRefSeq = seq;
        }
        int i = (unplacedHead + unplacedN) & ringMask;
        unplaced[i] = t;
        unplacedLen[i] = len;
        unplacedSeq[i] = seq != 0 ? seq : lastRefSeq;
        unplacedN++;
        reapPlaced();
    }

    /** Complete the lent path's sends the peer has read, in order. */
    private void reapPlaced() {
        if (unplacedN == 0) {
            return;
        }
        long placed = path.peerPlaced();
        while (unplacedN > 0 && unplacedSeq[unplacedHead] <= placed) {
            ViBufferTicket t = unplaced[unplacedHead];
            int len = unplacedLen[unplacedHead];
            unplaced[unplacedHead] = null;
            unplacedHead = (unplacedHead + 1) & ringMask;
            unplacedN--;
            t.complete(len);
            sendBufDone.addLast(t);
        }
    }

    /**
     * The next buffer send done on the lent path, waiting for the peer to
     * read it if need be (spinning, then sleeping on the ring); null when
     * the path went back to the library meanwhile (the caller waits there).
     */
    private ViBufferTicket waitSentLent(int microseconds) throws ViException {
        long spinEnd = 0;
        long deadline = 0;
        int polls = 0;
        while (true) {
            flushWaiting();
            reapPlaced();
            ViBufferTicket t = sendBufDone.pollFirst();
            if (t != null) {
                return t;
            }
            check();
            if (unplacedN == 0 && waitingN == 0) {
                throw new ViException("no ViBufferTicket send is posted on this Vi");
            }
            if (path.peerClosed()) {
                unlend();
                return null;
            }
            // The clock only after CLOCK_EVERY empty polls (at once for a
            // wait of 0): a message that comes during a read of it waits.
            if (microseconds != 0 && ++polls % CLOCK_EVERY != 0) {
                pause(SEND_PAUSES);
                continue;
            }
            if (deadline == 0) {
                long now = System.nanoTime();
                spinEnd = now + attrs.getSpinMicros() * 1000L;
                deadline = microseconds < 0 ? Long.MAX_VALUE : now + microseconds * 1000L;
            }
            if (pauseLent(spinEnd, deadline, microseconds, unplacedN > 0 ? unplacedSeq[unplacedHead] : 0)
                    == PATH_BACK) {
                return null;
            }
        }
    }

    /** {@link #pauseLent}: go on polling. */
    private static final int GO_ON = 0;
    /** {@link #pauseLent}: the lock was given up meanwhile (what it guards may have changed). */
    private static final int LOCK_GIVEN = 1;
    /** {@link #pauseLent}: the path went back to the library while the lock was given up. */
    private static final int PATH_BACK = 2;

    /** {@code n} spin-wait hints in a row. */
    private static void pause(int n) {
        for (int k = 0; k < n; k++) {
            Thread.onSpinWait();
        }
    }

    /**
     * One pause of a wait on the lent path, between polls that found
     * nothing: until {@code spinEnd} a spin (giving the lock to a thread
     * that waits for it), then a nap in the library on the ring (shorter
     * while sends wait for room, as nobody wakes it when room comes; also
     * woken once the peer placed {@code waitPlaced} of this side's
     * messages, if not 0), giving the lock up after it too.
     *
     * @throws ViTimeout once {@code deadline} passed
     */
    private int pauseLent(long spinEnd, long deadline, int microseconds, long waitPlaced) throws ViTimeout {
        long now = System.nanoTime();
        if (now - deadline >= 0) {
            throw new ViTimeout(microseconds);
        }
        if (now < spinEnd) {
            if (!lock.hasQueuedThreads()) {
                Thread.onSpinWait();
                return GO_ON;
            }
            lock.unlock();
            Thread.onSpinWait();
            lock.lock();
        } else {
            path.sleep(Math.min(waitingN > 0 ? ROOM_NAP_US : SLICE_US, Math.max(1, (deadline - now) / 1000)),
                    waitPlaced);
            if (!lock.hasQueuedThreads()) {
                return GO_ON;
            }
            lock.unlock();
            Thread.yield();
            lock.lock();
        }
        return path.isLent ? LOCK_GIVEN : PATH_BACK;
    }

    /**
     * Post a send of {@code len} bytes of {@code t}'s buffer from {@code
     * off} in the library, as buffer slot {@code k}: the library's status.
     */
    private int postBufSend(int k, ViBufferTicket t, int off, int len) {
        seg.set(ADDRESS, 0, t.buffer.region());
        seg.set(JAVA_LONG, 8, off);
        seg.set(JAVA_LONG, 16, len);
        try {
            return (int) Native.POST_SEND.invokeExact(viA, BUF | k, segA, 1L);
        } catch (Throwable e) {
            throw Native.fatal(e);
        }
    }

    /**
     * Post {@code t}'s buffer from {@code off} (to its end, at most a
     * transfer) in the library for a message, as buffer slot {@code k}:
     * the library's status.
     */
    private int postBufRecv(int k, ViBufferTicket t, int off) {
        seg.set(ADDRESS, 0, t.buffer.region());
        seg.set(JAVA_LONG, 8, off);
        seg.set(JAVA_LONG, 16, Math.min(t.buffer.size() - off, MAX_TRANSFER));
        try {
            return (int) Native.POST_RECV.invokeExact(viA, BUF | k, segA, 1L);
        } catch (Throwable e) {
            throw Native.fatal(e);
        }
    }

    /** What {@link #takeBufSlot} checks of a ticket, for a post that takes no slot. */
    private static void checkPostable(ViBufferTicket t) throws ViException {
        if (!t.registered) {
            throw new ViException("the ticket's buffer is unregistered, freed or closed");
        }
        if (t.posted) {
            throw new ViException("the ticket is already posted");
        }
    }

    private void checkTicket(ViBufferTicket t) throws ViException {
        if (t == null) {
            throw new ViException("the ticket is null");
        }
        if (t.vi != this) {
            throw new ViException("the ticket's buffer is registered with another Vi");
        }
    }

    private int takeBufSlot(ViBufferTicket t) throws ViException {
        // A registered ticket's buffer cannot be freed or closed (they
        // refuse while any ticket is registered), and a ticket is
        // unregistered only under this lock while not posted.
        if (!t.registered) {
            throw new ViException("the ticket's buffer is unregistered, freed or closed");
        }
        if (t.posted) {
            throw new ViException("the ticket is already posted");
        }
        if (bufFreeN == 0) {
            throw new ViException("the queues are full: " + bufTickets.length + " buffer tickets posted");
        }
        int k = bufFree[--bufFreeN];
        bufTickets[k] = t;
        t.reset();
        t.posted = true;
        return k;
    }

    private void releaseBufSlot(int k) {
        ViBufferTicket t = bufTickets[k];
        if (t != null) {
            t.posted = false;
        }
        bufTickets[k] = null;
        bufFree[bufFreeN++] = k;
    }

    private boolean anyBufSendPosted() {
        return bufFreeN + bufRecvPosted < bufTickets.length;
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
            unlendForClose();
            if (broken == null && sendFreeN < sendFree.length) {
                // Messages sent go out before the VI closes (send returns
                // once they are copied): wait for them, a while at most.
                try {
                    flush(CLOSE_FLUSH_US);
                } catch (ViException e) {
                    // Broken or too slow: closing completes them with an error.
                }
            }
            closed = true;
            for (int i = 0; i < recvTickets.length; i++) {
                if (recvTickets[i] != null) {
                    recvTickets[i].fail("UNET_VI_CLOSED");
                    recvTickets[i] = null;
                }
            }
            for (int k = 0; k < bufTickets.length; k++) {
                if (bufTickets[k] != null) {
                    bufTickets[k].fail("UNET_VI_CLOSED");
                    bufTickets[k] = null;
                }
            }
            if (sendQ != null) {
                sendQ.detach(this);
            }
            if (recvQ != null) {
                recvQ.detach(this);
            }
            closeHandle();
            // No access to the buffers after this (the arena bounds them),
            // then they go back to the engine.
            arena.close();
            freeRegion(sendRegion);
            freeRegion(recvRegion);
        } finally {
            lock.unlock();
        }
    }

    // -- internals (under the lock) -----------------------------------------

    private void closeHandle() {
        try {
            int ignored = (int) Native.VI_CLOSE.invokeExact(vi);
            assert ignored <= 0;
        } catch (Throwable t) {
            throw Native.fatal(t);
        }
    }

    private void check() throws ViException {
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
        for (int i = 0; i < recvTickets.length; i++) {
            if (recvTickets[i] != null) {
                recvTickets[i].fail(broken);
                recvTickets[i] = null;
                recvFree[recvFreeN++] = i;
                ticketsPosted--;
            }
        }
        for (int k = 0; k < bufTickets.length; k++) {
            if (bufTickets[k] != null) {
                bufTickets[k].fail(broken);
                releaseBufSlot(k);
            }
        }
        bufSendsInLibrary = 0;
        for (; heldN > 0; heldN--) {
            held[heldHead].fail(broken);
            held[heldHead] = null;
            heldHead = (heldHead + 1) & ringMask;
        }
        for (; unplacedN > 0; unplacedN--) {
            unplaced[unplacedHead].fail(broken);
            unplaced[unplacedHead] = null;
            unplacedHead = (unplacedHead + 1) & ringMask;
        }
        for (; waitingN > 0; waitingN--) {
            waiting[waitingHead].fail(broken);
            waiting[waitingHead] = null;
            waitingHead = (waitingHead + 1) & ringMask;
        }
        bufRecvPosted = 0;
    }

    private static void checkRange(byte[] b, int off, int len) throws ViException {
        if (b == null) {
            throw new ViException("the byte array is null");
        }
        if (off < 0 || len < 0 || off > b.length - len) {
            throw new ViException("offset " + off + " and length " + len + " do not fit an array of " + b.length);
        }
    }

    /** Enter the error state for VI error {@code code}; the exception to throw. */
    private ViException brokenBy(int code) {
        if (broken == null) {
            broken = Native.viErrorName(code);
        }
        return new ViException("the Vi is broken: " + broken, broken);
    }

    private void postSend(int s, MemorySegment region, long at, int len) throws ViException {
        seg.set(ADDRESS, 0, region);
        seg.set(JAVA_LONG, 8, at);
        seg.set(JAVA_LONG, 16, len);
        int r;
        try {
            r = (int) Native.POST_SEND.invokeExact(viA, (long) s, segA, 1L);
        } catch (Throwable t) {
            throw Native.fatal(t);
        }
        if (r != 0) {
            sendFree[sendFreeN++] = s;
            throw Native.failure("posting a send", r);
        }
    }

    /**
     * Sends {@code len} bytes of {@code b} straight from the array, as
     * buffer {@code s}'s message (its completion frees {@code s}); false
     * when the library cannot now (nothing sent, {@code s} still taken).
     */
    private boolean sendCopied(int s, byte[] b, int off, int len) throws ViException {
        int r;
        try {
            r = (int) Native.SEND_COPIED.invokeExact(viA, (long) s, MemorySegment.ofArray(b).asSlice(off, len),
                    (long) len);
        } catch (Throwable t) {
            throw Native.fatal(t);
        }
        if (r == 0) {
            return true;
        }
        if (r == Native.UNET_EFULL) {
            return false;
        }
        sendFree[sendFreeN++] = s;
        throw Native.failure("sending in place", r);
    }

    private void postRecv(int s, int len) throws ViException {
        seg.set(ADDRESS, 0, recvRegion);
        seg.set(JAVA_LONG, 8, (long) s * slot);
        seg.set(JAVA_LONG, 16, len);
        int r;
        try {
            r = (int) Native.POST_RECV.invokeExact(viA, (long) s, segA, 1L);
        } catch (Throwable t) {
            throw Native.fatal(t);
        }
        if (r != 0) {
            throw Native.failure("posting a receive", r);
        }
    }

    /** One poll of the send queue into {@code comp}: 1 when something completed. */
    private int sendDone() {
        try {
            return (int) Native.SEND_DONE.invokeExact(viA, compA);
        } catch (Throwable t) {
            throw Native.fatal(t);
        }
    }

    /** One poll of the receive queue into {@code comp}: 1 when something completed. */
    private int recvDone() {
        try {
            return (int) Native.RECV_DONE.invokeExact(viA, compA);
        } catch (Throwable t) {
            throw Native.fatal(t);
        }
    }

    /** Take every completed send back: its buffer is free again. */
    private void reapSends() throws ViException {
        ViException failed = null;
        while (sendDone() == 1) {
            ViException e = routeSend();
            if (e != null && failed == null) {
                failed = e;
            }
        }
        if (failed != null) {
            throw failed;
        }
    }

    private static long deadline(int microseconds) {
        return microseconds < 0 ? Long.MAX_VALUE : System.nanoTime() + microseconds * 1000L;
    }

    private void waitSend(int microseconds) throws ViException {
        waitSendUntil(deadline(microseconds), microseconds);
    }

    /** Wait for one send to complete, and take it back. */
    private void waitSendUntil(long deadline, int microseconds) throws ViException {
        if (!waitDone(true, deadline, microseconds)) {
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
        return waitDone(true, deadline, microseconds) ? routeSend() : null;
    }

    /**
     * The send completion in {@code comp}: a Javia-I buffer is free again,
     * a buffer ticket is done (and queued for sendBufWait). Its failure, if
     * it failed.
     */
    private ViException routeSend() {
        long id = comp.get(JAVA_LONG, 0);
        int status = comp.get(JAVA_INT, 8);
        int len = comp.get(JAVA_INT, 12);
        ViException e = status != 0 ? brokenBy(-status) : null;
        if ((id & BUF) != 0) {
            int k = (int) (id & ~BUF);
            ViBufferTicket t = bufTickets[k];
            releaseBufSlot(k);
            bufSendsInLibrary--;
            if (e != null) {
                t.fail(broken);
            } else {
                t.complete(len);
            }
            sendBufDone.addLast(t);
            return e;
        }
        sendFree[sendFreeN++] = (int) id;
        return e;
    }

    /**
     * Wait for the next receive completion into {@code comp}: polls with
     * the lock given up between polls for the spin time, then sleeps in
     * the library in slices, giving the lock up between them.
     */
    private void waitRecv(int microseconds) throws ViException {
        if (!waitDone(false, deadline(microseconds), microseconds)) {
            throw new ViException("no receive is posted on this Vi any more (another thread took it)");
        }
    }

    /**
     * Wait until {@code deadline} for the next completion of the send
     * ({@code send}) or receive queue, into {@code comp}. Polls for the spin
     * time (a local VI; one through the engines skips this), then waits in
     * the library in slices (it spins, then sleeps); between polls and slices
     * it gives the lock to any thread that waits for it, so that a blocked
     * sender never holds up a receiver on another thread, nor the reverse.
     * False when the queue has nothing outstanding (any more: another
     * thread may have taken it while the lock was given up).
     */
    private boolean waitDone(boolean send, long deadline, int microseconds) throws ViException {
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
                spinEnd = direct ? now + attrs.getSpinMicros() * 1000L : now;
            }
            if (now >= deadline) {
                throw new ViTimeout(microseconds);
            }
            if (now < spinEnd) {
                if (lock.hasQueuedThreads()) {
                    lock.unlock();
                    Thread.onSpinWait();
                    lock.lock();
                    check();
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
                check();
            }
        }
    }
}
