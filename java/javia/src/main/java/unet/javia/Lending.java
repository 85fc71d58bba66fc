package unet.javia;

import java.lang.foreign.MemorySegment;

import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * A VI's direct path while the library lends it to Javia ({@link
 * DirectPath}), with the buffer tickets that live on it: receives held
 * here until a message comes, sends the peer has not read yet, and sends
 * that wait for room in the ring. The path is lent whenever no send of the
 * VI's is outstanding in the library and no receive but buffer receives
 * (those come over with it); Javia-II's calls then read and write the
 * connection's rings themselves, with no call into the library for a
 * message. Everything here runs under the VI's lock.
 */
final class Lending {
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

    /**
     * How long a wait on the lent path naps while sends wait for room in
     * the ring (nobody wakes it when room comes), as the library's does.
     */
    private static final long ROOM_NAP_US = 50;

    private final Vi owner;
    private final ViLock lock;
    private final BufferSlots slots;
    private final int spinMicros;
    private final int queueDepth;

    /**
     * The VI's direct path. Null for a VI that cannot lend it (between
     * engines, with a completion queue, of reliable reception, strict
     * about receives not posted) or with lending turned off (the system
     * property {@code unet.javia.lend=false}).
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
     * The lending of {@code owner}'s path ({@code path}, null: never lent),
     * for a VI of attributes {@code attrs}.
     */
    Lending(Vi owner, ViLock lock, BufferSlots slots, DirectPath path, ViAttributes attrs) {
        this.owner = owner;
        this.lock = lock;
        this.slots = slots;
        this.path = path;
        this.spinMicros = attrs.getSpinMicros();
        this.queueDepth = attrs.getQueueDepth();
        // Rings of a power of two at least twice the depth: an index wraps
        // with a mask (a division on every message otherwise).
        int ring = Integer.highestOneBit(2 * queueDepth - 1) << 1;
        ringMask = ring - 1;
        held = new ViBufferTicket[ring];
        heldOff = new int[ring];
        unplaced = new ViBufferTicket[ring];
        unplacedLen = new int[ring];
        unplacedSeq = new long[ring];
        waiting = new ViBufferTicket[ring];
        waitingOff = new int[ring];
        waitingLen = new int[ring];
    }

    /** Whether the direct path is lent to Javia now. */
    boolean isLent() {
        return path != null && path.isLent;
    }

    /** Whether buffer receives are held here, posted while the path was lent. */
    boolean holds() {
        return heldN > 0;
    }

    /**
     * Post a buffer send on the lent path if it is lent (borrowing it if
     * the library can lend it): into the ring, or queued for room in it.
     * False when the send is the library's to post.
     */
    boolean postSend(ViBufferTicket t, int off, int len) throws ViException {
        // Sends waiting for the peer are bounded as the library's queue
        // bounds them: past that, the library's answer.
        if (path == null || unplacedN + waitingN >= queueDepth || !lent()) {
            return false;
        }
        BufferSlots.checkPostable(t);
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
            return true;
        }
        return put == PUT;
    }

    /**
     * Post a buffer receive on the lent path if it is lent (borrowing it
     * if the library can lend it): held here until a message comes (or
     * the path goes back). False when the receive is the library's to post.
     */
    boolean postRecv(ViBufferTicket t, int off) throws ViException {
        if (!lent()) {
            return false;
        }
        BufferSlots.checkPostable(t);
        if (slots.recvPosted >= queueDepth) {
            return false;
        }
        int i = (heldHead + heldN) & ringMask;
        held[i] = t;
        heldOff[i] = off;
        heldN++;
        t.reset();
        t.posted = true;
        slots.recvPosted++;
        return true;
    }

    /**
     * Whether the direct path is lent here now, borrowing it if the
     * library can lend it ({@link Vi#libraryIdle}).
     */
    private boolean lent() {
        if (path == null) {
            return false;
        }
        if (path.isLent) {
            return true;
        }
        if (owner.broken != null || owner.closed || !owner.libraryIdle() || !path.lend()) {
            return false;
        }
        // The receives the library had posted are held here now, in order.
        for (int i = 0; i < path.lentRecvs(); i++) {
            long id = path.lentRecvId(i);
            if ((id & BufferSlots.BUF) == 0) {
                throw new AssertionError("Javia: the library handed over a receive it was not given: " + id);
            }
            int k = (int) (id & ~BufferSlots.BUF);
            int h = (heldHead + heldN) & ringMask;
            held[h] = slots.tickets[k];
            heldOff[h] = slots.off[k];
            heldN++;
            slots.forget(k);
        }
        return true;
    }

    /**
     * Hand the lent path back before a call into the library's data path;
     * the receives held here are posted there, in order.
     */
    void unlend() throws ViException {
        if (path == null || !path.isLent) {
            return;
        }
        // Sends the peer has not read yet go back with the path, under
        // slots of their own, for the library to complete.
        int n = unplacedN;
        for (int i = 0; i < n; i++) {
            int k = slots.adopt(unplaced[unplacedHead]);
            MemorySegment e = path.unplaced.asSlice(i * DirectPath.UNPLACED.byteSize(), DirectPath.UNPLACED);
            e.set(JAVA_LONG, 0, BufferSlots.BUF | k);
            e.set(JAVA_LONG, 8, unplacedLen[unplacedHead]);
            e.set(JAVA_LONG, 16, unplacedSeq[unplacedHead]);
            unplaced[unplacedHead] = null;
            unplacedHead = (unplacedHead + 1) & ringMask;
        }
        unplacedN = 0;
        slots.sendsInLibrary += n;
        path.giveBack(n);
        // Sends that waited for room: posted in the library, in order.
        while (waitingN > 0) {
            ViBufferTicket t = waiting[waitingHead];
            int off = waitingOff[waitingHead];
            int len = waitingLen[waitingHead];
            waiting[waitingHead] = null;
            waitingHead = (waitingHead + 1) & ringMask;
            waitingN--;
            int k = slots.adopt(t);
            int r = slots.postSend(k, t, off, len);
            if (r != 0) {
                slots.release(k);
                t.fail("UNET_VI_CLOSED");
                throw Native.failure("posting a buffer send", r);
            }
            slots.sendsInLibrary++;
        }
        while (heldN > 0) {
            ViBufferTicket t = held[heldHead];
            int off = heldOff[heldHead];
            held[heldHead] = null;
            heldHead = (heldHead + 1) & ringMask;
            heldN--;
            // Already posted and counted: only the library learns of it now.
            int k = slots.adopt(t);
            slots.off[k] = off;
            int r = slots.postRecv(k, t, off);
            if (r != 0) {
                // Cannot happen (the library's queue has room for every
                // buffer ticket Javia posts); fail it rather than lose it.
                slots.release(k);
                slots.recvPosted--;
                t.fail("UNET_VI_CLOSED");
                throw Native.failure("posting a buffer receive", r);
            }
        }
    }

    /** As {@link #unlend}, on the way to closing: a failure there changes nothing of the close. */
    void unlendForClose() {
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
    ViBufferTicket takeHeld(int microseconds) throws ViException {
        long spinEnd = 0;
        long deadline = 0;
        int polls = 0;
        while (true) {
            if (waitingN > 0) {
                flushWaiting();
            }
            ViBufferTicket t = held[heldHead];
            int off = heldOff[heldHead];
            int n = path.poll(t.memory, off, Math.min(t.buffer.size() - off, Vi.MAX_TRANSFER));
            if (n >= 0) {
                held[heldHead] = null;
                heldHead = (heldHead + 1) & ringMask;
                heldN--;
                slots.recvPosted--;
                t.complete(n);
                return t;
            }
            if (n == DirectPath.OTHER || path.peerClosed()) {
                unlend();
                return null;
            }
            // The clock only after CLOCK_EVERY empty polls (at once for a
            // wait of 0): a message that comes during a read of it waits.
            if (microseconds != 0 && ++polls % LibraryQueues.CLOCK_EVERY != 0) {
                pause(RECV_PAUSES);
                continue;
            }
            if (deadline == 0) {
                long now = System.nanoTime();
                spinEnd = now + spinMicros * 1000L;
                deadline = microseconds < 0 ? Long.MAX_VALUE : now + microseconds * 1000L;
            }
            int r = pauseLent(spinEnd, deadline, microseconds, 0);
            if (r != GO_ON) {
                owner.check();
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
            slots.sendDone.addLast(t);
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
            slots.sendDone.addLast(t);
        }
    }

    /**
     * The next buffer send done on the lent path, waiting for the peer to
     * read it if need be (spinning, then sleeping on the ring); null when
     * the path went back to the library meanwhile (the caller waits there).
     */
    ViBufferTicket waitSentLent(int microseconds) throws ViException {
        long spinEnd = 0;
        long deadline = 0;
        int polls = 0;
        while (true) {
            flushWaiting();
            reapPlaced();
            ViBufferTicket t = slots.sendDone.pollFirst();
            if (t != null) {
                return t;
            }
            owner.check();
            if (unplacedN == 0 && waitingN == 0) {
                throw new ViException("no ViBufferTicket send is posted on this Vi");
            }
            if (path.peerClosed()) {
                unlend();
                return null;
            }
            // The clock only after CLOCK_EVERY empty polls (at once for a
            // wait of 0): a message that comes during a read of it waits.
            if (microseconds != 0 && ++polls % LibraryQueues.CLOCK_EVERY != 0) {
                pause(SEND_PAUSES);
                continue;
            }
            if (deadline == 0) {
                long now = System.nanoTime();
                spinEnd = now + spinMicros * 1000L;
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
            path.sleep(Math.min(waitingN > 0 ? ROOM_NAP_US : LibraryQueues.SLICE_US,
                    Math.max(1, (deadline - now) / 1000)), waitPlaced);
            if (!lock.hasQueuedThreads()) {
                return GO_ON;
            }
            lock.unlock();
            Thread.yield();
            lock.lock();
        }
        return path.isLent ? LOCK_GIVEN : PATH_BACK;
    }

    /** A broken VI completes nothing more: every ticket held here is done, with {@code reason}. */
    void failAll(String reason) {
        for (; heldN > 0; heldN--) {
            held[heldHead].fail(reason);
            held[heldHead] = null;
            heldHead = (heldHead + 1) & ringMask;
        }
        for (; unplacedN > 0; unplacedN--) {
            unplaced[unplacedHead].fail(reason);
            unplaced[unplacedHead] = null;
            unplacedHead = (unplacedHead + 1) & ringMask;
        }
        for (; waitingN > 0; waitingN--) {
            waiting[waitingHead].fail(reason);
            waiting[waitingHead] = null;
            waitingHead = (waitingHead + 1) & ringMask;
        }
    }
}
