package unet.javia;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;

/**
 * A local VI's data path lent to Javia by the library
 * ({@code unet_vi_direct_lend}): Javia reads and writes the two rings of
 * the VI's direct connection itself, so that a message of the common kind
 * costs no call into the library (a call costs more than the ring's own
 * work for a small message).
 *
 * <p>The rings follow the direct path's layout ({@code unet_abi}; the
 * record format below is checked against the golden vector of a ring the
 * Rust side wrote): records of an 8-byte little-endian header, the tag
 * {@code (position >> 3) + 1} in its low half and the payload's length
 * with the padding and reference flags in its high half, each record
 * 32-byte aligned. The peer writes the receiving ring and is not trusted:
 * a header is checked before anything is copied, every access stays inside
 * the ring (its extent checked first: see {@code ALL}) or the peer
 * region's segment, and whatever is not a small message that fits its
 * receive ({@link #poll} says {@link #OTHER}) is left where it is for the
 * library, which reports it as the Rust client does.
 *
 * <p>Used under its VI's lock. While lent, the library refuses every call
 * on the VI but the few this class makes.
 */
final class DirectPath {
    /** {@code unet_vi_direct}: 240 bytes. */
    static final StructLayout LAYOUT = MemoryLayout.structLayout(
            ADDRESS.withName("tx"),
            ADDRESS.withName("rx"),
            JAVA_LONG.withName("ring_size"),
            JAVA_LONG.withName("max_len"),
            JAVA_LONG.withName("pull_min"),
            ADDRESS.withName("tx_consumed"),
            ADDRESS.withName("tx_sleeping"),
            ADDRESS.withName("rx_consumed"),
            ADDRESS.withName("peer_closed"),
            ADDRESS.withName("tx_counters"),
            ADDRESS.withName("rx_counters"),
            JAVA_LONG.withName("tx_pos"),
            JAVA_LONG.withName("rx_pos"),
            JAVA_LONG.withName("rx_published"),
            JAVA_LONG.withName("sent"),
            JAVA_LONG.withName("sent_bytes"),
            JAVA_LONG.withName("received"),
            JAVA_LONG.withName("received_bytes"),
            JAVA_LONG.withName("tx_full"),
            ADDRESS.withName("tx_placed"),
            ADDRESS.withName("rx_placed"),
            JAVA_LONG.withName("sent_base"),
            JAVA_LONG.withName("placed_base"),
            JAVA_LONG.withName("wait_placed"),
            ADDRESS.withName("unplaced"),
            JAVA_LONG.withName("nunplaced"),
            JAVA_LONG.withName("asymmetric"),
            ADDRESS.withName("recv_ids"),
            JAVA_LONG.withName("recv_cap"),
            JAVA_LONG.withName("nrecv"));

    /** {@code unet_vi_unplaced}: a send the peer has not placed yet, handed back. */
    static final StructLayout UNPLACED = MemoryLayout.structLayout(
            JAVA_LONG.withName("id"), JAVA_LONG.withName("len"), JAVA_LONG.withName("seq"));

    private static final long TX = off("tx");
    private static final long RX = off("rx");
    private static final long RING_SIZE = off("ring_size");
    private static final long MAX_LEN = off("max_len");
    private static final long PULL_MIN = off("pull_min");
    private static final long TX_CONSUMED = off("tx_consumed");
    private static final long TX_SLEEPING = off("tx_sleeping");
    private static final long RX_CONSUMED = off("rx_consumed");
    private static final long PEER_CLOSED = off("peer_closed");
    private static final long TX_COUNTERS = off("tx_counters");
    private static final long RX_COUNTERS = off("rx_counters");
    private static final long TX_POS = off("tx_pos");
    private static final long RX_POS = off("rx_pos");
    private static final long RX_PUBLISHED = off("rx_published");
    private static final long SENT = off("sent");
    private static final long SENT_BYTES = off("sent_bytes");
    private static final long RECEIVED = off("received");
    private static final long RECEIVED_BYTES = off("received_bytes");
    private static final long TX_FULL = off("tx_full");
    private static final long TX_PLACED = off("tx_placed");
    private static final long RX_PLACED = off("rx_placed");
    private static final long SENT_BASE = off("sent_base");
    private static final long PLACED_BASE = off("placed_base");
    private static final long WAIT_PLACED = off("wait_placed");
    private static final long UNPLACED_AT = off("unplaced");
    private static final long NUNPLACED = off("nunplaced");
    private static final long ASYMMETRIC = off("asymmetric");
    private static final long RECV_IDS = off("recv_ids");
    private static final long RECV_CAP = off("recv_cap");
    private static final long NRECV = off("nrecv");

    /** A reference record's entry: region handle (u32), length (u32), offset (u64), little-endian. */
    static final int REF_SEGMENT = 16;
    /** The most entries a reference record has (VI_MAX_SEGMENTS). */
    static final int MAX_SEGMENTS = 8;
    private static final ValueLayout.OfInt U32 = JAVA_INT.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfLong U64 = JAVA_LONG.withOrder(ByteOrder.LITTLE_ENDIAN);

    // The direct ring's record format (unet_abi::RECORD_*).
    static final int RECORD_HEADER = 8;
    static final int RECORD_ALIGN = 32;
    static final int RECORD_PAD = 1 << 31;
    static final int RECORD_REF = 1 << 30;

    /** {@link #poll}: nothing in the ring yet. */
    static final int EMPTY = -1;
    /** {@link #poll}: something for the library (a reference, too long, padding or a header it must judge). */
    static final int OTHER = -2;

    /** A word of shared memory, read with acquire and written with release. */
    private static final VarHandle WORD = JAVA_LONG.varHandle();
    private static final VarHandle WORD32 = JAVA_INT.varHandle();

    /**
     * All of memory, through which the ring and the lent lines are read
     * and written at their addresses: a constant the compiler folds the
     * segment's checks of (a segment per ring and line, held in fields,
     * has them checked again on every access: a fifth of a small
     * message's send and receive). What keeps every access inside the
     * ring is the path's own arithmetic, as in the library: positions
     * masked by the ring's size, a record's extent checked against the
     * ring's end before it is read ({@link #poll}, {@link #pull}), and
     * room reserved inside it before it is written ({@link #reserve}: a
     * record is at most half the ring, {@link #fitsRecord}). A message's
     * copies between the ring or a peer's region and a ticket's buffer go
     * through it too, the buffer's bounds checked first ({@link #address}),
     * the peer region's against the length the library mapped (a copy
     * between two segments checks each one's bounds, session and
     * alignment again: a 64 B send and receive in one thread took 3 ns
     * more, of 45).
     */
    private static final MemorySegment ALL = everything();

    // Restricted: a segment over every address. Sound as used: only at
    // the addresses the library lent, inside the extents it gave (above).
    @SuppressWarnings("restricted")
    private static MemorySegment everything() {
        return MemorySegment.NULL.reinterpret(Long.MAX_VALUE);
    }

    /**
     * The address of {@code len} bytes of {@code s} from {@code off}, for
     * a copy through {@link #ALL}, which checks neither {@code s}'s bounds
     * (checked here) nor that its memory is still there: the caller's to
     * keep (a ticket's buffer cannot be freed or closed while the ticket
     * is registered, and the VI posts only registered tickets).
     */
    private static long address(MemorySegment s, long off, long len) {
        if (off < 0 || len < 0 || len > s.byteSize() - off) {
            throw new IndexOutOfBoundsException(
                    len + " bytes from " + off + " are outside a segment of " + s.byteSize());
        }
        return s.address() + off;
    }

    private final long viA;
    private final MemorySegment lent;
    private final long lentA;
    /** Sends the peer has not placed yet, for the path's return (filled by the VI). */
    final MemorySegment unplaced;
    /** The numbers of the receives the library had posted, handed over with the path. */
    private final MemorySegment recvIds;
    private int nRecv;
    /** Out-parameters of the peer region call: its address, length, and the region evicted (or -1). */
    private final MemorySegment out;
    private final long outA;
    /** The library said this VI can never lend its path. */
    private boolean never;
    /** Lent now. */
    boolean isLent;

    // What the lending gave (the same for the VI's life).
    /** The rings' addresses (0: not lent yet). */
    private long tx;
    private long rx;
    private long size;
    private long mask;
    private long maxLen;
    /**
     * This process takes part in asymmetric fences: a peer about to sleep
     * makes this thread execute a full barrier, so publishing needs only
     * the compiler's ordering before the sleeping flag is read.
     */
    private boolean asymmetric;
    /** Messages this large go as references: the library's to send (known once lent). */
    long pullMin = Long.MAX_VALUE;
    // The lent lines' addresses.
    private long txConsumed;
    private long txSleeping;
    private long rxConsumed;
    private long peerClosed;
    private long txCounters;
    private long rxCounters;
    private long txPlaced;
    private long rxPlaced;

    /**
     * The peer's regions this side read references from, mapped by the
     * library: valid until the next call that maps one or the path's
     * return (the library keeps a bounded number), so forgotten at both.
     */
    private final int[] peerHandles = new int[64];
    private final MemorySegment[] peerSegs = new MemorySegment[64];
    private int peerN;
    /** Where {@link #peerRegion} looks first. */
    private int peerNext;
    // A reference record's entries, copied out of the ring once (the peer
    // may rewrite the ring while they are used).
    private final long[] refFrom = new long[MAX_SEGMENTS];
    private final int[] refHandle = new int[MAX_SEGMENTS];
    /** Regions the library unmapped to make room, so far (each one forgotten here). */
    private int evicted;
    private final long[] refOff = new long[MAX_SEGMENTS];
    private final long[] refLen = new long[MAX_SEGMENTS];

    // Where this side is, while lent.
    private long txPos;
    /** Records end at or before this position with no look at the consumer: what it had read, plus the ring. */
    private long txLimit;
    private long rxPos;
    private long rxPublished;
    private long publishAt;
    private long sent;
    private long sentBytes;
    private long received;
    private long receivedBytes;
    private long txFull;
    /** Whether a message came since this side last sent (see {@link #takeAhead}). */
    private boolean answered;
    /** The VI's message counts at the lending: this side's sends and placements are numbered on from them. */
    private long sentBase;
    private long placedBase;

    /**
     * @param viA the VI handle's address
     * @param arena where the lending structure lives (the VI's, closed with it)
     */
    DirectPath(long viA, Arena arena, int maxUnplaced) {
        this.viA = viA;
        this.lent = arena.allocate(LAYOUT);
        this.lentA = lent.address();
        this.unplaced = arena.allocate(UNPLACED, Math.max(1, maxUnplaced));
        this.recvIds = arena.allocate(JAVA_LONG, Math.max(1, maxUnplaced));
        this.out = arena.allocate(24, 8);
        this.outA = out.address();
    }

    /**
     * A path that only reads {@code ring} from position {@code rxPos}, lent
     * by nobody (the tests' reading of the golden ring).
     */
    static DirectPath reader(MemorySegment ring, long rxPos) {
        return onRing(ring, rxPos, rxPos, rxPos);
    }

    /**
     * A path lent by nobody that writes {@code ring} from position {@code
     * txPos} and reads it from {@code rxPos} (the tests' look at what its
     * sends leave in a ring, read back); the reader of what it writes has
     * read up to {@code consumed}.
     */
    static DirectPath onRing(MemorySegment ring, long rxPos, long txPos, long consumed) {
        Arena arena = Arena.ofAuto();
        DirectPath p = new DirectPath(0, arena, 1);
        // The words the library would lend: in the lending structure's
        // arena, alive as long as the path.
        MemorySegment words = arena.allocate(64, 64);
        words.set(JAVA_LONG, 8, consumed);
        p.tx = ring.address();
        p.rx = ring.address();
        p.size = ring.byteSize();
        p.mask = p.size - 1;
        p.maxLen = p.size / 2 - RECORD_HEADER;
        p.rxPos = rxPos;
        p.publishAt = Long.MAX_VALUE;
        p.txPos = txPos;
        p.txLimit = txPos;
        p.rxConsumed = words.address();
        p.txConsumed = words.address() + 8;
        p.txSleeping = words.address() + 16;
        p.rxCounters = words.address() + 24;
        p.txCounters = words.address() + 40;
        return p;
    }

    /** Where the next record is read (for the tests). */
    long rxPos() {
        return rxPos;
    }

    private static long off(String field) {
        return LAYOUT.byteOffset(MemoryLayout.PathElement.groupElement(field));
    }

    /** The tag a record at {@code position} carries once ready (unsigned 32 bits). */
    static long tag(long position) {
        return ((position >>> 3) + 1) & 0xffff_ffffL;
    }

    /** Bytes a record of {@code len} payload bytes takes in a ring. */
    static long span(long len) {
        return (RECORD_HEADER + len + RECORD_ALIGN - 1) & -RECORD_ALIGN;
    }

    /**
     * Borrow the path, if the library lends it now (no send of the VI's
     * outstanding in it; the receives it had posted come with it: {@link
     * #lentRecvs}). A VI that can never lend it is not asked again.
     */
    boolean lend() {
        if (never) {
            return false;
        }
        lent.set(ADDRESS, RECV_IDS, recvIds);
        lent.set(JAVA_LONG, RECV_CAP, recvIds.byteSize() / 8);
        int r;
        try {
            r = (int) Native.DIRECT_LEND.invokeExact(viA, lentA);
        } catch (Throwable t) {
            throw Native.fatal(t);
        }
        if (r == Native.UNET_ENOTSUP) {
            never = true;
            return false;
        }
        if (r != 0) {
            return false;
        }
        if (tx != lent.get(ADDRESS, TX).address()) {
            map();
        }
        txPos = lent.get(JAVA_LONG, TX_POS);
        txLimit = txPos;
        rxPos = lent.get(JAVA_LONG, RX_POS);
        rxPublished = lent.get(JAVA_LONG, RX_PUBLISHED);
        publishAt = rxPublished + size / 4;
        sent = 0;
        sentBytes = 0;
        received = 0;
        receivedBytes = 0;
        txFull = 0;
        nRecv = (int) Math.min(lent.get(JAVA_LONG, NRECV), recvIds.byteSize() / 8);
        sentBase = lent.get(JAVA_LONG, SENT_BASE);
        placedBase = lent.get(JAVA_LONG, PLACED_BASE);
        peerN = 0;
        isLent = true;
        return true;
    }

    // The library lent these pointers, valid until the VI is closed (its
    // handle is closed only after the last use, under the VI's lock).
    private void map() {
        size = lent.get(JAVA_LONG, RING_SIZE);
        mask = size - 1;
        maxLen = lent.get(JAVA_LONG, MAX_LEN);
        pullMin = lent.get(JAVA_LONG, PULL_MIN);
        asymmetric = lent.get(JAVA_LONG, ASYMMETRIC) == 1;
        tx = lent.get(ADDRESS, TX).address();
        rx = lent.get(ADDRESS, RX).address();
        txConsumed = lent.get(ADDRESS, TX_CONSUMED).address();
        txSleeping = lent.get(ADDRESS, TX_SLEEPING).address();
        rxConsumed = lent.get(ADDRESS, RX_CONSUMED).address();
        peerClosed = lent.get(ADDRESS, PEER_CLOSED).address();
        txCounters = lent.get(ADDRESS, TX_COUNTERS).address();
        rxCounters = lent.get(ADDRESS, RX_COUNTERS).address();
        txPlaced = lent.get(ADDRESS, TX_PLACED).address();
        rxPlaced = lent.get(ADDRESS, RX_PLACED).address();
    }

    /** How many receives the library had posted when it lent the path (now the borrower's). */
    int lentRecvs() {
        return nRecv;
    }

    /** The number of the {@code i}th of them, in the order posted. */
    long lentRecvId(int i) {
        return recvIds.getAtIndex(JAVA_LONG, i);
    }

    /**
     * Hand the path back to the library, with where this side got to and
     * what it counted, and the first {@code nUnplaced} entries of {@link
     * #unplaced}: sends the peer has not placed yet, for the library to
     * complete.
     */
    void giveBack(int nUnplaced) {
        store();
        lent.set(ADDRESS, UNPLACED_AT, nUnplaced == 0 ? MemorySegment.NULL : unplaced);
        lent.set(JAVA_LONG, NUNPLACED, nUnplaced);
        peerN = 0;
        isLent = false;
        int r;
        try {
            r = (int) Native.DIRECT_RETURN.invokeExact(viA, lentA);
        } catch (Throwable t) {
            throw Native.fatal(t);
        }
        if (r != 0) {
            throw new AssertionError("Javia: the library refused the VI's path back: " + r);
        }
    }

    private void store() {
        lent.set(JAVA_LONG, TX_POS, txPos);
        lent.set(JAVA_LONG, RX_POS, rxPos);
        lent.set(JAVA_LONG, RX_PUBLISHED, rxPublished);
        lent.set(JAVA_LONG, SENT, sent);
        lent.set(JAVA_LONG, SENT_BYTES, sentBytes);
        lent.set(JAVA_LONG, RECEIVED, received);
        lent.set(JAVA_LONG, RECEIVED_BYTES, receivedBytes);
        lent.set(JAVA_LONG, TX_FULL, txFull);
    }

    /** Whether a message of {@code len} bytes fits one record of the ring. */
    boolean fitsRecord(int len) {
        return len <= maxLen;
    }

    /**
     * Send {@code len} bytes of {@code src} from {@code off} as one record
     * (at most {@link #fitsRecord}), if that can be done now: false
     * (nothing sent) when the ring has no room. Only while the peer is
     * there ({@link #peerClosed}: the caller looks first).
     */
    boolean trySend(MemorySegment src, long off, int len) {
        if (len > maxLen) {
            // The ring's bounds rest on this (see ALL).
            throw new IllegalArgumentException("a record of " + len + " bytes in a ring that takes " + maxLen);
        }
        long at = reserve(span(len));
        if (at < 0) {
            return false;
        }
        MemorySegment.copy(ALL, address(src, off, len), ALL, tx + at + RECORD_HEADER, len);
        publish(at, len, len, len);
        return true;
    }

    /**
     * Send {@code len} bytes of the region numbered {@code handle} from
     * {@code off} as a reference record (the peer reads them from the
     * region, granted to it): the message's number, complete once the
     * peer has placed as many ({@link #peerPlaced}); 0 when the ring has
     * no room now. Only while the peer is there, as {@link #trySend}.
     */
    long trySendRef(int handle, long off, int len) {
        long at = reserve(span(REF_SEGMENT));
        if (at < 0) {
            return 0;
        }
        ALL.set(U32, tx + at + RECORD_HEADER, handle);
        ALL.set(U32, tx + at + RECORD_HEADER + 4, len);
        ALL.set(U64, tx + at + RECORD_HEADER + 8, off);
        publish(at, REF_SEGMENT | RECORD_REF, REF_SEGMENT, len);
        return sentBase + sent;
    }

    /**
     * Room for a record of {@code sp} bytes at the producer's position
     * (padding the rest of the lap first if it does not fit there): its
     * offset in the ring, or -1 when there is no room. (The caller has
     * seen the peer still there: {@link #peerClosed}.)
     */
    private long reserve(long sp) {
        long at = txPos & mask;
        long pad = at + sp > size ? size - at : 0;
        if (txPos + pad + sp > txLimit) {
            // Acquire: the consumer's reads of those records are done.
            long consumed = (long) WORD.getAcquire(ALL, txConsumed);
            // The peer may write any position; one ahead of ours only lets
            // us overwrite what it has not read.
            txLimit = consumed < 0 || consumed > Long.MAX_VALUE - size ? Long.MAX_VALUE : consumed + size;
            if (txPos + pad + sp > txLimit) {
                txFull++;
                return -1;
            }
        }
        if (pad > 0) {
            WORD.setRelease(ALL, tx + at, tag(txPos) | ((long) (RECORD_PAD | (int) pad) << 32));
            txPos += pad;
            at = 0;
        }
        return at;
    }

    /**
     * Publish the record written at {@code at}: its header's length word
     * {@code word} ({@code bytes} in the ring), a message of {@code len}
     * bytes for the VI's count. Wakes the peer if it sleeps.
     */
    private void publish(long at, int word, int bytes, int len) {
        // Release: the payload is visible before the header.
        WORD.setRelease(ALL, tx + at, tag(txPos) | ((long) word << 32));
        txPos += span(bytes);
        sent++;
        sentBytes += len;
        // One writer: plain stores (the engine reads them for unet stat).
        ALL.set(JAVA_LONG, txCounters, ALL.get(JAVA_LONG, txCounters) + 1);
        ALL.set(JAVA_LONG, txCounters + 8, ALL.get(JAVA_LONG, txCounters + 8) + bytes);
        wakeIfAsleep();
        if (answered) {
            answered = false;
            takeAhead(bytes);
        }
    }

    /** Lines {@link #takeAhead} writes at most: those of a record of up to about 256 bytes. */
    private static final int AHEAD_LINES = 4;

    /**
     * Take for writing, now, the lines beyond the producer's position that
     * the next record of {@code bytes} payload bytes will take (at most
     * {@link #AHEAD_LINES}), as far as they are free; called after a
     * publish that answers a message ({@link #answered}). The peer read
     * those lines a lap ago: a store to one waits for the line to be
     * fetched and the peer's copy dropped, and the next header's release
     * waits for that store, on the next message's path. Taken here, the
     * fetch overlaps the wait for the peer's answer (64 B round trips,
     * alternating with and without: 0.91-0.95x with the two cores near
     * each other, 0.86-1.00x far apart). Not in a stream of sends, where
     * the next record follows at once and the peer, reading close behind,
     * may be fetching those lines itself (64 B bursts were 1.45x slower in
     * two runs of five with every publish taking lines ahead). The line of
     * the next header is left alone (the peer may be spinning on it), and
     * each line taken gets a first word no header at that position has,
     * so that a consumer looking there takes it for no record.
     */
    private void takeAhead(long bytes) {
        long end = txPos + span(bytes);
        long l = (txPos & ~63L) + 64;
        // Free: the peer read what was there a lap ago (see reserve).
        for (int n = 0; n < AHEAD_LINES && l < end && l <= txLimit - 64; n++, l += 64) {
            ALL.set(JAVA_LONG, tx + (l & mask), tag(l) ^ NOT_A_TAG);
        }
    }

    /** A tag with this bit flipped is another position's. */
    private static final long NOT_A_TAG = 0x8000_0000L;

    /**
     * After publishing: either the peer sees it when it looks again before
     * sleeping, or we see its flag here. That needs the store before the
     * load: a full fence, or, with asymmetric fences, only that the
     * compiler keeps them in order (the fence is the peer's to execute
     * here, before it sleeps), which a release fence between them does in
     * HotSpot; a full fence would wait for every store of the message
     * copied just before to drain, on the message's path.
     */
    private void wakeIfAsleep() {
        if (asymmetric) {
            VarHandle.releaseFence();
        } else {
            VarHandle.fullFence();
        }
        if ((int) WORD32.getOpaque(ALL, txSleeping) != 0) {
            wake();
        }
    }

    /** How many of this side's messages the peer has placed. */
    long peerPlaced() {
        return (long) WORD.getAcquire(ALL, txPlaced);
    }

    /**
     * Take the next message into {@code dst} from {@code off}, at most
     * {@code room} bytes: its length, {@link #EMPTY}, or {@link #OTHER}
     * when the next record is for the library (left in the ring).
     */
    int poll(MemorySegment dst, long off, long room) {
        while (true) {
            long at = rxPos & mask;
            // Acquire: pairs with the producer's release of the header.
            long h = (long) WORD.getAcquire(ALL, rx + at);
            if ((h & 0xffff_ffffL) != tag(rxPos)) {
                return EMPTY;
            }
            int word = (int) (h >>> 32);
            if ((word & RECORD_PAD) != 0) {
                // Padding ends a lap, after the last record that fitted; a
                // record always fits at the start of a lap. Anything else is
                // a broken peer: the library's to find.
                long pad = word & ~RECORD_PAD;
                if (at == 0 || pad != size - at) {
                    return OTHER;
                }
                rxPos += pad;
                continue;
            }
            if ((word & RECORD_REF) != 0) {
                long bytes = word & ~RECORD_REF;
                return bytes == REF_SEGMENT ? pullOne(at, dst, off, room) : pull(at, bytes, dst, off, room);
            }
            long len = word;
            long sp = span(len);
            if (at + sp > size || len > room) {
                return OTHER;
            }
            MemorySegment.copy(ALL, rx + at + RECORD_HEADER, ALL, address(dst, off, len), len);
            consumed(len, len);
            return (int) len;
        }
    }

    /**
     * {@link #pull} of a reference record of one entry (what a Javia
     * sender makes: one buffer, one segment), without the entries' arrays:
     * its length, or {@link #OTHER} as {@link #pull} says.
     */
    private int pullOne(long at, MemorySegment dst, long off, long room) {
        if (at + span(REF_SEGMENT) > size) {
            return OTHER;
        }
        long e = rx + at + RECORD_HEADER;
        int handle = ALL.get(U32, e);
        long len = Integer.toUnsignedLong(ALL.get(U32, e + 4));
        long from = ALL.get(U64, e + 8);
        // Mapped until the library maps another region: none is, before the copy.
        MemorySegment r = peerRegion(handle);
        if (!inside(r, from, len) || len > room) {
            return OTHER;
        }
        MemorySegment.copy(ALL, r.address() + from, ALL, address(dst, off, len), len);
        pulled(REF_SEGMENT, len);
        return (int) len;
    }

    /** Whether {@code len} bytes from {@code from} lie inside peer region {@code r} (null: none). */
    private static boolean inside(MemorySegment r, long from, long len) {
        return r != null && from >= 0 && len <= r.byteSize() && from <= r.byteSize() - len;
    }

    /**
     * A reference record of {@code bytes} bytes is read, its {@code len}
     * bytes copied out of the peer's regions: consumed, and the placed
     * count released (the copies are done before the sender, acquiring
     * it, reuses its buffer), waking the sender if it sleeps waiting.
     */
    private void pulled(long bytes, long len) {
        consumed(bytes, len);
        WORD.setRelease(ALL, rxPlaced, placedBase + received);
        wakeIfAsleep();
    }

    /**
     * The message a reference record of {@code bytes} bytes at {@code at}
     * names in the peer's regions, copied into {@code dst} from {@code
     * off}: its length, or {@link #OTHER} when the record is malformed,
     * names memory outside its region or a region the library cannot map,
     * or does not fit {@code room} (the library's to report; nothing is
     * written or consumed).
     */
    private int pull(long at, long bytes, MemorySegment dst, long off, long room) {
        if (bytes == 0 || bytes % REF_SEGMENT != 0 || bytes / REF_SEGMENT > MAX_SEGMENTS
                || at + span(bytes) > size) {
            return OTHER;
        }
        int n = (int) (bytes / REF_SEGMENT);
        // The entries are read out of the ring once: the peer may rewrite it.
        for (int i = 0; i < n; i++) {
            long e = at + RECORD_HEADER + (long) i * REF_SEGMENT;
            refHandle[i] = ALL.get(U32, rx + e);
            refLen[i] = Integer.toUnsignedLong(ALL.get(U32, rx + e + 4));
            refOff[i] = ALL.get(U64, rx + e + 8);
        }
        // Mapping one region may unmap another the library kept: after any
        // such eviction the entries are looked up again (each maps its
        // region at most once more: the evicted one is the oldest).
        long total;
        int evictions;
        do {
            evictions = evicted;
            total = 0;
            for (int i = 0; i < n; i++) {
                MemorySegment r = peerRegion(refHandle[i]);
                long len = refLen[i];
                long from = refOff[i];
                if (!inside(r, from, len)) {
                    return OTHER;
                }
                refFrom[i] = r.address() + from;
                total += len;
            }
        } while (evictions != evicted);
        if (total > room) {
            return OTHER;
        }
        long to = address(dst, off, total);
        for (int i = 0; i < n; i++) {
            MemorySegment.copy(ALL, refFrom[i], ALL, to, refLen[i]);
            to += refLen[i];
        }
        pulled(bytes, total);
        return (int) total;
    }

    /**
     * The record of {@code bytes} payload bytes at the consumer's position
     * is read, a message of {@code len} bytes placed: move on, count it,
     * and publish the position every quarter ring.
     */
    private void consumed(long bytes, long len) {
        rxPos += span(bytes);
        answered = true;
        received++;
        receivedBytes += len;
        ALL.set(JAVA_LONG, rxCounters, ALL.get(JAVA_LONG, rxCounters) + 1);
        ALL.set(JAVA_LONG, rxCounters + 8, ALL.get(JAVA_LONG, rxCounters + 8) + bytes);
        if (rxPos >= publishAt) {
            // Release: the records read are done with before the producer,
            // acquiring this, writes over them.
            WORD.setRelease(ALL, rxConsumed, rxPos);
            rxPublished = rxPos;
            publishAt = rxPos + size / 4;
        }
    }

    /** The peer's region numbered {@code handle}, mapped by the library; null if it refuses it. */
    // Restricted: a segment of a native address. Sound: the library maps
    // the region for reading, `len` bytes, until its next call that maps
    // one or the path's return; both forget these segments.
    @SuppressWarnings("restricted")
    private MemorySegment peerRegion(int handle) {
        // From the one after the last found: buffers sent in turn are
        // found at once.
        int n = peerN;
        int j = peerNext;
        for (int k = 0; k < n; k++) {
            if (j >= n) {
                j = 0;
            }
            if (peerHandles[j] == handle) {
                peerNext = j + 1;
                return peerSegs[j];
            }
            j++;
        }
        int r;
        try {
            r = (int) Native.DIRECT_PEER_REGION.invokeExact(viA, handle, outA, outA + 8, outA + 16);
        } catch (Throwable t) {
            throw Native.fatal(t);
        }
        if (r != 0) {
            return null;
        }
        long gone = out.get(JAVA_LONG, 16);
        if (gone >= 0) {
            evicted++;
            for (int i = 0; i < peerN; i++) {
                if (peerHandles[i] == (int) gone) {
                    peerN--;
                    peerHandles[i] = peerHandles[peerN];
                    peerSegs[i] = peerSegs[peerN];
                    peerSegs[peerN] = null;
                    break;
                }
            }
        }
        MemorySegment seg = out.get(ADDRESS, 0).reinterpret(out.get(JAVA_LONG, 8));
        if (peerN == peerSegs.length) {
            // Cannot happen (the library keeps at most as many, and says
            // which it lets go); forget them all rather than overrun.
            java.util.Arrays.fill(peerSegs, null);
            peerN = 0;
        }
        peerHandles[peerN] = handle;
        peerSegs[peerN] = seg;
        peerN++;
        return seg;
    }

    /**
     * Grant the buffer's region to the peer for sends by reference (the
     * library asks the engine once per region and VI): false if refused.
     */
    boolean grant(MemorySegment region) {
        int r;
        try {
            r = (int) Native.DIRECT_GRANT.invokeExact(viA, region.address());
        } catch (Throwable t) {
            throw Native.fatal(t);
        }
        return r == 0;
    }

    /** Whether the peer has closed. */
    boolean peerClosed() {
        return (int) WORD32.getAcquire(ALL, peerClosed) != 0;
    }

    /**
     * Sleep in the library until something is in the ring, the peer has
     * placed {@code waitPlaced} of this side's messages (0: not waited
     * for), the peer closes or {@code micros} pass (or for no reason:
     * poll again).
     */
    void sleep(long micros, long waitPlaced) {
        lent.set(JAVA_LONG, RX_POS, rxPos);
        lent.set(JAVA_LONG, WAIT_PLACED, waitPlaced);
        int r;
        try {
            r = (int) Native.DIRECT_SLEEP.invokeExact(viA, lentA, micros);
        } catch (Throwable t) {
            throw Native.fatal(t);
        }
        if (r != 0) {
            throw new AssertionError("Javia: the library refused to sleep on the lent path: " + r);
        }
        rxPublished = rxPos;
        publishAt = rxPos + size / 4;
    }

    private void wake() {
        try {
            int ignored = (int) Native.DIRECT_WAKE.invokeExact(viA);
            assert ignored == 0;
        } catch (Throwable t) {
            throw Native.fatal(t);
        }
    }
}
