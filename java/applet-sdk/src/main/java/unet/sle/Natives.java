package unet.sle;

/**
 * The native methods a JIVE applet may call.
 *
 * <p>A JIVE applet is a single Java class running on the network interface.
 * Besides its own methods it may only call static methods of this class, and
 * only those of the domains the host granted when it loaded the applet (for
 * example {@code unet applet run} grants the {@code test} domain). JIVE
 * replaces each method by its own native implementation; the bodies here are
 * plain-Java reference implementations with the same behaviour, so that an
 * applet can also be compiled against this class and run on a standard JVM,
 * for example to compare results or timings.
 *
 * <p>An error in a native (an array index out of range, a {@code null}
 * array) is a fault that stops the applet's call in JIVE; here it is the
 * corresponding Java exception.
 *
 * <h2>Domain {@code test}</h2>
 * {@link #nop()}, {@link #id(int)}, {@link #sum(byte[], int, int)} and
 * {@link #fill(byte[], int, int)}: natives without effect outside the applet,
 * for tests and benchmarks.
 *
 * <h2>Domain {@code unet-sle}</h2>
 * The U-Net/SLE natives, granted to applets attached to unet endpoints: they
 * act on the applet's own endpoint only (its buffer area, queues and
 * channels). The first eight are those of the U-Net/SLE paper's section
 * 2.1; {@link #now()}, {@link #setTimer(int, int)},
 * {@link #putFreeBuffer(int)} and {@link #sendUser(int, int, int)} are
 * additions for protocols (flow control, retransmission). Their bodies here
 * throw {@link UnsupportedOperationException} (except
 * {@link #newAlignedArray(int)}): they only do something in the engine. A
 * native refusing its arguments is a fault of kind 5, reported to the
 * application as an applet fault; array faults are kind 1.
 */
public final class Natives {
    private Natives() {
    }

    /**
     * Does nothing. Domain {@code test}; the null native call of the
     * benchmarks.
     */
    public static void nop() {
    }

    /**
     * Returns its argument.
     *
     * @param x any value
     * @return {@code x}
     */
    public static int id(int x) {
        return x;
    }

    /**
     * Adds up {@code len} bytes of {@code a} from index {@code off}, each
     * byte taken as signed ({@code -128..127}), with int wrap-around.
     *
     * @param a   the array
     * @param off index of the first byte
     * @param len number of bytes; {@code 0} returns {@code 0}
     * @return {@code a[off] + ... + a[off + len - 1]}
     * @throws NullPointerException           if {@code a} is {@code null}
     * @throws ArrayIndexOutOfBoundsException if {@code off} or {@code len}
     *                                        is negative or
     *                                        {@code off + len > a.length}
     */
    public static int sum(byte[] a, int off, int len) {
        checkRange(a, off, len);
        int s = 0;
        for (int i = off; i < off + len; i++) {
            s += a[i];
        }
        return s;
    }

    /**
     * Sets the first {@code len} bytes of {@code a} to {@code (byte) v}.
     *
     * @param a   the array
     * @param v   the value, narrowed to a byte as by a {@code (byte)} cast
     * @param len number of bytes from index {@code 0}
     * @throws NullPointerException           if {@code a} is {@code null}
     * @throws ArrayIndexOutOfBoundsException if {@code len} is negative or
     *                                        greater than {@code a.length}
     */
    public static void fill(byte[] a, int v, int len) {
        checkRange(a, 0, len);
        for (int i = 0; i < len; i++) {
            a[i] = (byte) v;
        }
    }

    // ------------------------------------------------------------------
    // Domain unet-sle: the U-Net/SLE natives
    // ------------------------------------------------------------------

    private static UnsupportedOperationException engineOnly() {
        return new UnsupportedOperationException("U-Net/SLE native: runs only in the unet engine");
    }

    /**
     * Copies {@code len} bytes of the endpoint's buffer area, starting at
     * offset {@code useroff}, into {@code a[aoff .. aoff + len)} (the
     * U-Net/SLE "host to LanAI" DMA). Domain {@code unet-sle}.
     *
     * <p>Faults (kind 5, a native refused its arguments) when {@code aoff},
     * {@code useroff} or {@code len} is negative,
     * {@code aoff + len > a.length}, or {@code useroff + len} exceeds the
     * buffer area; faults (kind 1) when {@code a} is {@code null}. Costs one
     * unit of work plus one per 64 bytes.
     *
     * @param a       the destination array
     * @param aoff    index of the first byte written in {@code a}
     * @param useroff offset in the endpoint's buffer area
     * @param len     number of bytes; {@code 0} copies nothing
     */
    public static void doHtoLDMA(byte[] a, int aoff, int useroff, int len) {
        throw engineOnly();
    }

    /**
     * Copies {@code a[aoff .. aoff + len)} into the endpoint's buffer area at
     * offset {@code useroff} (the U-Net/SLE "LanAI to host" DMA). Domain
     * {@code unet-sle}. The applet may write anywhere in its own buffer
     * area; writing over a buffer the application is using is the
     * application's error, not a fault.
     *
     * <p>Faults (kind 5) when {@code aoff}, {@code useroff} or {@code len} is
     * negative, {@code aoff + len > a.length}, or {@code useroff + len}
     * exceeds the buffer area; faults (kind 1) when {@code a} is
     * {@code null}. Costs one unit of work plus one per 64 bytes.
     *
     * @param a       the source array
     * @param aoff    index of the first byte read from {@code a}
     * @param useroff offset in the endpoint's buffer area
     * @param len     number of bytes; {@code 0} copies nothing
     */
    public static void doLtoHDMA(byte[] a, int aoff, int useroff, int len) {
        throw engineOnly();
    }

    /**
     * Transmits {@code a[aoff .. aoff + len)} as one message on channel
     * {@code chan} of this endpoint; it arrives at the peer like any message
     * sent on that channel (and runs the peer's {@code doRx} if the peer has
     * an applet). The bytes are copied before this returns, so the applet
     * may reuse the array at once. Domain {@code unet-sle}.
     *
     * <p>Faults (kind 5) when {@code aoff} or {@code len} is negative,
     * {@code aoff + len > a.length}, {@code len} is {@code 0} or above the
     * largest message, {@code chan} is not a channel this endpoint holds, or
     * the channel's peer is gone; faults (kind 1) when {@code a} is
     * {@code null}. Costs one unit of work plus one per 64 bytes.
     *
     * @param a    the array holding the message
     * @param aoff index of its first byte
     * @param chan the channel tag to send on
     * @param len  its length in bytes, at least 1
     */
    public static void txPush(byte[] a, int aoff, int chan, int len) {
        throw engineOnly();
    }

    /**
     * Pushes a receive descriptor into the user's receive queue: a message
     * of {@code len} bytes that arrived on channel {@code chan}, held in the
     * buffers at {@code offsets[0 .. ceil(len / getFreeBufferLength()))}, in
     * order, each full but the last. The remaining entries are ignored.
     * Domain {@code unet-sle}. The buffers are normally ones popped with
     * {@link #getFreeBuffer()} and filled with {@link #doLtoHDMA}; the
     * application gives them back to its free queue when it has read them.
     * When the receive queue is full the message is dropped and counted (no
     * fault).
     *
     * <p>Faults (kind 5) when {@code offsets.length != 14}, {@code chan} is
     * outside {@code 0..65535}, {@code len} is not in
     * {@code 1 .. 14 * getFreeBufferLength()}, or one of the named buffers
     * does not lie wholly within the buffer area; faults (kind 1) when
     * {@code offsets} is {@code null}.
     *
     * @param offsets buffer-area offsets of the message's buffers; exactly 14
     *                entries
     * @param chan    the channel tag the user sees the message arrive on
     * @param len     the message length in bytes
     */
    public static void dmaRxd(int[] offsets, int chan, int len) {
        throw engineOnly();
    }

    /**
     * Pushes a receive descriptor carrying the message inline:
     * {@code payload[0 .. len)} as a message of {@code len} bytes that
     * arrived on channel {@code chan}. No buffer is used. Domain
     * {@code unet-sle}. When the receive queue is full the message is
     * dropped and counted (no fault).
     *
     * <p>Faults (kind 5) when {@code len} is negative, above 56 or above
     * {@code payload.length}, or {@code chan} is outside {@code 0..65535};
     * faults (kind 1) when {@code payload} is {@code null}.
     *
     * @param payload the message, from index 0
     * @param chan    the channel tag the user sees the message arrive on
     * @param len     the message length, {@code 0..56}
     */
    public static void dmaRxdPayload(byte[] payload, int chan, int len) {
        throw engineOnly();
    }

    /**
     * Pops the next buffer from the user's free queue (buffers the applet
     * gave back with {@link #putFreeBuffer(int)} come first). Domain
     * {@code unet-sle}. The buffer is the applet's until it names it in
     * {@link #dmaRxd} or gives it back; a buffer taken and neither delivered
     * nor given back is lost to the endpoint.
     *
     * @return the buffer's offset in the buffer area, or {@code -1} when the
     *         free queue is empty
     */
    public static int getFreeBuffer() {
        throw engineOnly();
    }

    /**
     * The size of this endpoint's receive buffers, fixed when the endpoint
     * was created. Domain {@code unet-sle}.
     *
     * @return the buffer size in bytes (a multiple of 64)
     */
    public static int getFreeBufferLength() {
        throw engineOnly();
    }

    /**
     * Allocates a byte array of {@code nbytes} bytes, zeroed, suitable for
     * the copying natives (every JIVE array is). Domain {@code unet-sle}.
     * Unlike the other natives of this domain, this one also runs on a
     * standard JVM.
     *
     * <p>Faults (kind 1) when {@code nbytes} is negative and (kind 4) when
     * the applet's heap quota would be exceeded.
     *
     * @param nbytes the array length
     * @return a new {@code byte[nbytes]}
     */
    public static byte[] newAlignedArray(int nbytes) {
        return new byte[nbytes];
    }

    /**
     * A clock in microseconds since the applet was attached, read once per
     * invocation (every call within one {@code doTx}, {@code doRx} or
     * {@code doTimer} returns the same value). It wraps from
     * {@code 2^31 - 1} to {@code 0} after about 35 minutes; compare times by
     * subtraction. Domain {@code unet-sle}.
     *
     * @return microseconds, {@code 0 .. 2^31 - 1}
     */
    public static int now() {
        throw engineOnly();
    }

    /**
     * Arranges for the applet's {@code doTimer(arg)} to be called once, no
     * earlier than {@code delayUs} microseconds from now. Timers are not
     * cancelled: an applet that no longer needs one ignores the call (for
     * example by comparing {@code arg} with a generation number). An applet
     * without a {@code doTimer} method ignores its timers; a timer that falls
     * due while no applet is attached is dropped. Domain {@code unet-sle}.
     *
     * <p>Faults (kind 5) when {@code delayUs} is negative or the engine holds
     * too many pending timers (65536, all endpoints together).
     *
     * @param delayUs the delay in microseconds, {@code 0} for "as soon as
     *                possible"
     * @param arg     the argument {@code doTimer} receives
     */
    public static void setTimer(int delayUs, int arg) {
        throw engineOnly();
    }

    /**
     * Gives a buffer taken with {@link #getFreeBuffer()} back; the next
     * {@link #getFreeBuffer()} calls return it before any buffer of the
     * user's free queue. Domain {@code unet-sle}.
     *
     * <p>Faults (kind 5) when {@code off} is negative, the buffer
     * {@code off .. off + getFreeBufferLength()} does not lie within the
     * buffer area, or the engine already holds as many given-back buffers as
     * the free queue's capacity.
     *
     * @param off the buffer's offset in the buffer area
     */
    public static void putFreeBuffer(int off) {
        throw engineOnly();
    }

    /**
     * Transmits {@code len} bytes of the endpoint's buffer area at
     * {@code useroff} as one message on channel {@code chan}, without
     * copying them through an applet array ({@code doTx} of the standard
     * U-Net behaviour is {@code sendUser(channel, length, offset)}). Domain
     * {@code unet-sle}.
     *
     * <p>Faults (kind 5) when {@code useroff} or {@code len} is negative,
     * {@code useroff + len} exceeds the buffer area, {@code len} is {@code 0}
     * or above the largest message, {@code chan} is not a channel this
     * endpoint holds, or its peer is gone. Costs one unit of work plus one
     * per 64 bytes.
     *
     * @param chan    the channel tag to send on
     * @param len     the message length in bytes, at least 1
     * @param useroff offset of the message in the buffer area
     */
    public static void sendUser(int chan, int len, int useroff) {
        throw engineOnly();
    }

    private static void checkRange(byte[] a, int off, int len) {
        if (a == null) {
            throw new NullPointerException();
        }
        if (off < 0 || len < 0 || off > a.length - len) {
            throw new ArrayIndexOutOfBoundsException(
                    "range [" + off + ", " + off + " + " + len + ") of length " + a.length);
        }
    }
}
