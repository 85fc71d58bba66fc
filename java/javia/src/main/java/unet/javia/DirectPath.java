package unet.javia;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.invoke.VarHandle;

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
 * the ring's segment, and whatever is not a small message that fits its
 * receive ({@link #poll} says {@link #OTHER}) is left where it is for the
 * library, which reports it as the Rust client does.
 *
 * <p>Used under its VI's lock. While lent, the library refuses every call
 * on the VI but the few this class makes.
 */
final class DirectPath {
    /** {@code unet_vi_direct}: 152 bytes. */
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
            JAVA_LONG.withName("tx_full"));

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

    private final long viA;
    private final MemorySegment lent;
    private final long lentA;
    /** The library said this VI can never lend its path. */
    private boolean never;
    /** Lent now. */
    boolean isLent;

    // What the lending gave (the same for the VI's life).
    private MemorySegment tx;
    private MemorySegment rx;
    private long size;
    private long mask;
    private long maxLen;
    /** Messages this large go as references: the library's to send (known once lent). */
    long pullMin = Long.MAX_VALUE;
    private MemorySegment txConsumed;
    private MemorySegment txSleeping;
    private MemorySegment rxConsumed;
    private MemorySegment peerClosed;
    private MemorySegment txCounters;
    private MemorySegment rxCounters;

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

    /**
     * @param viA the VI handle's address
     * @param arena where the lending structure lives (the VI's, closed with it)
     */
    DirectPath(long viA, Arena arena) {
        this.viA = viA;
        this.lent = arena.allocate(LAYOUT);
        this.lentA = lent.address();
    }

    /**
     * A path that only reads {@code ring} from position {@code rxPos}, lent
     * by nobody (the tests' reading of the golden ring).
     */
    static DirectPath reader(MemorySegment ring, long rxPos) {
        Arena arena = Arena.ofAuto();
        DirectPath p = new DirectPath(0, arena);
        p.rx = ring;
        p.size = ring.byteSize();
        p.mask = p.size - 1;
        p.rxPos = rxPos;
        p.publishAt = Long.MAX_VALUE;
        p.rxConsumed = arena.allocate(8, 8);
        p.rxCounters = arena.allocate(16, 8);
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
     * Borrow the path, if the library lends it now (nothing of the VI's is
     * outstanding in it). A VI that can never lend it is not asked again.
     */
    boolean lend() {
        if (never) {
            return false;
        }
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
        if (tx == null || tx.address() != lent.get(ADDRESS, TX).address()) {
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
        isLent = true;
        return true;
    }

    // Restricted: segments of native addresses. Sound: the library lent
    // these pointers, valid until the VI is closed (its handle is closed
    // only after the last use, under the VI's lock), with these lengths.
    @SuppressWarnings("restricted")
    private void map() {
        size = lent.get(JAVA_LONG, RING_SIZE);
        mask = size - 1;
        maxLen = lent.get(JAVA_LONG, MAX_LEN);
        pullMin = lent.get(JAVA_LONG, PULL_MIN);
        tx = lent.get(ADDRESS, TX).reinterpret(size);
        rx = lent.get(ADDRESS, RX).reinterpret(size);
        txConsumed = lent.get(ADDRESS, TX_CONSUMED).reinterpret(8);
        txSleeping = lent.get(ADDRESS, TX_SLEEPING).reinterpret(4);
        rxConsumed = lent.get(ADDRESS, RX_CONSUMED).reinterpret(8);
        peerClosed = lent.get(ADDRESS, PEER_CLOSED).reinterpret(4);
        txCounters = lent.get(ADDRESS, TX_COUNTERS).reinterpret(16);
        rxCounters = lent.get(ADDRESS, RX_COUNTERS).reinterpret(16);
    }

    /** Hand the path back to the library, with where this side got to and what it counted. */
    void giveBack() {
        store();
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

    /**
     * Send {@code len} bytes of {@code src} from {@code off} as one record,
     * if that can be done now: false (nothing sent) for a message the
     * library sends by reference, a ring without room, or a peer gone.
     */
    boolean trySend(MemorySegment src, long off, int len) {
        if (len >= pullMin || len > maxLen || (int) WORD32.getAcquire(peerClosed, 0L) != 0) {
            return false;
        }
        long sp = span(len);
        long at = txPos & mask;
        long pad = at + sp > size ? size - at : 0;
        if (txPos + pad + sp > txLimit) {
            // Acquire: the consumer's reads of those records are done.
            long consumed = (long) WORD.getAcquire(txConsumed, 0L);
            // The peer may write any position; one ahead of ours only lets
            // us overwrite what it has not read.
            txLimit = consumed < 0 || consumed > Long.MAX_VALUE - size ? Long.MAX_VALUE : consumed + size;
            if (txPos + pad + sp > txLimit) {
                txFull++;
                return false;
            }
        }
        if (pad > 0) {
            WORD.setRelease(tx, at, tag(txPos) | ((long) (RECORD_PAD | (int) pad) << 32));
            txPos += pad;
            at = 0;
        }
        MemorySegment.copy(src, off, tx, at + RECORD_HEADER, len);
        // Release: the payload is visible before the header.
        WORD.setRelease(tx, at, tag(txPos) | ((long) len << 32));
        txPos += sp;
        sent++;
        sentBytes += len;
        // One writer: plain stores (the engine reads them for unet stat).
        txCounters.set(JAVA_LONG, 0, txCounters.get(JAVA_LONG, 0) + 1);
        txCounters.set(JAVA_LONG, 8, txCounters.get(JAVA_LONG, 8) + len);
        // Either the consumer sees the record when it looks again before
        // sleeping, or we see its sleeping flag here.
        VarHandle.fullFence();
        if ((int) WORD32.get(txSleeping, 0L) != 0) {
            wake();
        }
        return true;
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
            long h = (long) WORD.getAcquire(rx, at);
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
                return OTHER;
            }
            long len = word;
            long sp = span(len);
            if (at + sp > size || len > room) {
                return OTHER;
            }
            MemorySegment.copy(rx, at + RECORD_HEADER, dst, off, len);
            rxPos += sp;
            received++;
            receivedBytes += len;
            rxCounters.set(JAVA_LONG, 0, rxCounters.get(JAVA_LONG, 0) + 1);
            rxCounters.set(JAVA_LONG, 8, rxCounters.get(JAVA_LONG, 8) + len);
            if (rxPos >= publishAt) {
                // Release: the records read are done with before the
                // producer, acquiring this, writes over them.
                WORD.setRelease(rxConsumed, 0L, rxPos);
                rxPublished = rxPos;
                publishAt = rxPos + size / 4;
            }
            return (int) len;
        }
    }

    /** Whether the peer has closed. */
    boolean peerClosed() {
        return (int) WORD32.getAcquire(peerClosed, 0L) != 0;
    }

    /**
     * Sleep in the library until something is in the ring, the peer
     * closes or {@code micros} pass (or for no reason: poll again).
     */
    void sleep(long micros) {
        lent.set(JAVA_LONG, RX_POS, rxPos);
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
