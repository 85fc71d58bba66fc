package unet.spine;

/**
 * The native methods of a SPINE extension (domain {@code spine}).
 *
 * <p>An extension is one Java class loaded onto an adapter (a unet engine)
 * by a host application. Its initialiser {@code static void init(int arg)}
 * runs once, at installation, and installs the extension's
 * <em>handlers</em> with {@link #addHandler(String, int, int)}: static
 * methods {@code static void name(int context, int msg)} that run when a
 * message carrying their handler number arrives (SPINE's active messages).
 * The method is named by a string literal, which JIVE resolves when it
 * loads the class.
 *
 * <p>Handlers are <em>ephemeral</em>: JIVE checks at load that a handler,
 * and every method of the class it can call, allocates no array and calls
 * no native but the ephemeral ones (all of this class but
 * {@code addHandler}). The arrays an extension needs (its scratch region)
 * are made by its initialiser and kept in static fields. Each invocation
 * runs under a time budget (10 µs unless the host asked for another): past
 * it the invocation is stopped, counted and reported to the owner.
 *
 * <p>Messages and data buffers reach a handler as {@code int} handles,
 * checked on every use: a message handle is valid only during the
 * invocation it was given to; a buffer handle while the invocation holds
 * the buffer (the bulk buffer of its message, or one its extension
 * {@link #keep(int) keeps}). A forged or stale handle, or an array range
 * outside its array, stops the invocation (a fault, counted). A full queue
 * or pool, a destination that does not exist or a limit is an error code
 * the handler may act on: {@link #E_FULL}, {@link #E_DEAD},
 * {@link #E_BAD_DEST}, {@link #E_BAD_HANDLE}, {@link #E_LIMIT},
 * {@link #E_RANGE}.
 *
 * <p>A destination is {@code (kind << 24) | id}: {@link #DEST_LOCAL} (a
 * handler of this adapter), {@link #DEST_HOST} (an endpoint of this
 * adapter: one of the extension's owner, or the one whose message is being
 * answered), {@link #DEST_PEER} (a peer adapter), {@link #DEST_WIRE} (a
 * remote adapter over the wire), {@link #DEST_PORT} (a raw-frame port of
 * this adapter on a network interface: the message's arguments followed by
 * its bulk data go out as one frame). {@link #source(int)} gives a
 * message's source in that form: a frame a port received is a bulk message
 * whose source is {@code (DEST_PORT << 24) | port}.
 *
 * <p>Extensions call one another through <em>domains</em>. An extension
 * exports its {@code public static} methods whose parameters are
 * {@code int} and whose result is {@code int} or {@code void} (but
 * {@code init} and its handlers) into a domain named after it: the name
 * it was loaded under, for example {@code router}. An extension loaded
 * with that domain granted calls them as ordinary static calls of the
 * exporter's class ({@code Lookup.lookup(addr)}, compiled against that
 * class or a stub with the same signatures); the call runs in the
 * exporter's statics and scratch, within the caller's time budget, and a
 * fault in it stops the caller's invocation. A call of a domain not
 * granted, of a method not exported or with another signature is refused
 * at load with what is missing; a handler may call only exports that are
 * ephemeral themselves.
 *
 * <p>The bodies here are plain-Java stand-ins so that extensions compile
 * and their pure parts can be tested on a standard JVM: the natives only
 * do something in the engine, and throw
 * {@link UnsupportedOperationException} here (but {@link #nowMicros()}).
 */
public final class Spine {
    private Spine() {
    }

    /** A queue or pool is full: try later. */
    public static final int E_FULL = -1;
    /** The destination is gone (a peer adapter died). */
    public static final int E_DEAD = -2;
    /** No such destination or handler. */
    public static final int E_BAD_DEST = -3;
    /** Not a handle this invocation holds. */
    public static final int E_BAD_HANDLE = -4;
    /** A limit: arguments longer than 240 bytes, or the extension keeps
     * as many buffers as it may (256). */
    public static final int E_LIMIT = -5;
    /** A framebuffer this extension does not have, or a range outside the
     * framebuffer or the buffer: nothing written (counted). */
    public static final int E_RANGE = -6;

    /** Destination kind: a handler of this adapter. */
    public static final int DEST_LOCAL = 0;
    /** Destination kind: an endpoint of this adapter. */
    public static final int DEST_HOST = 1;
    /** Destination kind: a peer adapter on this host. */
    public static final int DEST_PEER = 2;
    /** Destination kind: a remote adapter over the wire. */
    public static final int DEST_WIRE = 3;
    /** Destination kind: a raw-frame port of this adapter (its frames come
     * from that source too). */
    public static final int DEST_PORT = 4;

    /**
     * The runtime's own handler on a peer adapter or at the far end of a
     * link: a bulk message sent to {@code (DEST_PEER << 24) | peer} or
     * {@code (DEST_WIRE << 24) | link} with this handler number goes out
     * of the receiving adapter's raw-frame port whose id is the message's
     * first argument (an {@code int}, little-endian, in its first four
     * bytes), the bulk data as the frame, with no handler run there: the
     * egress half of a router. A message that names no open port of that
     * adapter, or carries no frame, is dropped and counted on the queue
     * ({@code rx_bad_port}) or the link ({@code bad_port}).
     */
    public static final int PORT_OUT = 1;

    /** Most bytes of arguments a message carries. */
    public static final int ARGS_MAX = 240;

    private static UnsupportedOperationException engineOnly() {
        return new UnsupportedOperationException("a SPINE native: only in the engine");
    }

    /**
     * Install handler {@code method} under handler number {@code hNumber}
     * (64 to 1023) with {@code context} as its first argument. Only the
     * initialiser may call it. A number out of range or already taken
     * refuses the whole installation, with the reason.
     *
     * @param method the name of a {@code static void (int, int)} method of
     *     this class, as a string literal
     * @param hNumber the handler number
     * @param context the value passed to every invocation
     * @return true if recorded
     */
    public static boolean addHandler(String method, int hNumber, int context) {
        throw engineOnly();
    }

    /**
     * The length of a message's arguments.
     *
     * @param msg the invocation's message
     * @return the number of bytes of arguments (0 to 240)
     */
    public static int argsLength(int msg) {
        throw engineOnly();
    }

    /**
     * One byte of a message's arguments.
     *
     * @param msg the invocation's message
     * @param i an index below {@link #argsLength(int)}
     * @return argument byte {@code i}, 0 to 255
     */
    public static int argByte(int msg, int i) {
        throw engineOnly();
    }

    /**
     * Four bytes of a message's arguments, as an int.
     *
     * @param msg the invocation's message
     * @param off a byte offset, with {@code off + 4 <= argsLength(msg)}
     * @return the little-endian int at {@code off}
     */
    public static int argInt(int msg, int off) {
        throw engineOnly();
    }

    /**
     * Copy arguments from byte {@code off} into {@code dst}.
     *
     * @param msg the invocation's message
     * @param off the first byte of the arguments to copy
     * @param dst the array to copy into
     * @param dstOff where in {@code dst} the copy starts
     * @param len the most bytes to copy
     * @return the bytes copied (fewer than {@code len} at the end)
     */
    public static int readArgs(int msg, int off, byte[] dst, int dstOff, int len) {
        throw engineOnly();
    }

    /**
     * Where a message came from.
     *
     * @param msg the invocation's message
     * @return its source as a destination ({@code (kind << 24) | id})
     */
    public static int source(int msg) {
        throw engineOnly();
    }

    /**
     * A bulk message's data buffer.
     *
     * @param msg the invocation's message
     * @return the handle of its bulk buffer, or -1 for a small message
     */
    public static int bulk(int msg) {
        throw engineOnly();
    }

    /**
     * The length of a data buffer.
     *
     * @param buf a buffer the invocation holds
     * @return its length in bytes
     */
    public static int bufferLength(int buf) {
        throw engineOnly();
    }

    /**
     * Copy bytes of buffer {@code buf} from {@code off} into {@code dst}.
     *
     * @param buf a buffer the invocation holds
     * @param off the first byte of the buffer to copy
     * @param dst the array to copy into
     * @param dstOff where in {@code dst} the copy starts
     * @param len the most bytes to copy
     * @return the bytes copied
     */
    public static int readBuffer(int buf, int off, byte[] dst, int dstOff, int len) {
        throw engineOnly();
    }

    /**
     * Copy {@code len} bytes of {@code src} into buffer {@code buf} at
     * {@code off}.
     *
     * @param buf a buffer the invocation holds
     * @param off where in the buffer the copy starts
     * @param src the array to copy from
     * @param srcOff the first byte of {@code src} to copy
     * @param len the most bytes to copy
     * @return the bytes copied
     */
    public static int writeBuffer(int buf, int off, byte[] src, int srcOff, int len) {
        throw engineOnly();
    }

    /**
     * Hold buffer {@code buf} past this invocation (charged to the
     * extension, at most 256). An invocation that is stopped gives back
     * what it kept.
     *
     * @param buf a buffer the invocation holds
     * @return 0, or {@link #E_LIMIT}
     */
    public static int keep(int buf) {
        throw engineOnly();
    }

    /**
     * Give back a buffer the extension keeps.
     *
     * @param buf a buffer the extension keeps
     */
    public static void release(int buf) {
        throw engineOnly();
    }

    /**
     * Send a small message of {@code len} bytes of {@code args} to handler
     * {@code handler} at {@code dest}.
     *
     * @param dest the destination, {@code (kind << 24) | id}
     * @param handler the handler number at the destination
     * @param args the arguments
     * @param off the first byte of {@code args} to send
     * @param len the bytes of arguments (at most 240)
     * @return 0, or an error code
     */
    public static int send(int dest, int handler, byte[] args, int off, int len) {
        throw engineOnly();
    }

    /**
     * Send a bulk message: arguments and buffer {@code buf} (which the new
     * message holds; the sender may go on holding it too).
     *
     * @param dest the destination, {@code (kind << 24) | id}
     * @param handler the handler number at the destination
     * @param args the arguments
     * @param off the first byte of {@code args} to send
     * @param len the bytes of arguments (at most 240)
     * @param buf a buffer the invocation holds
     * @return 0, or an error code
     */
    public static int sendBulk(int dest, int handler, byte[] args, int off, int len, int buf) {
        throw engineOnly();
    }

    /**
     * Send a small message to the source of {@code msg}.
     *
     * @param msg the invocation's message
     * @param handler the handler number at the source
     * @param args the arguments
     * @param off the first byte of {@code args} to send
     * @param len the bytes of arguments (at most 240)
     * @return 0, or an error code
     */
    public static int reply(int msg, int handler, byte[] args, int off, int len) {
        throw engineOnly();
    }

    /**
     * The adapter's clock.
     *
     * @return microseconds on the adapter's clock (wrapping)
     */
    public static int nowMicros() {
        return (int) (System.nanoTime() / 1000);
    }

    /**
     * Run handler {@code method} once, {@code micros} microseconds from
     * now, with {@code context} and an empty message from the adapter. An
     * initialiser or a handler may call it; an extension has at most 64
     * timers pending (set and not yet run), and they go when it is
     * unloaded.
     *
     * @param micros the delay in microseconds (0 or more)
     * @param method the name of a {@code static void (int, int)} method of
     *     this class, as a string literal
     * @param context the value passed as the handler's first argument
     * @return 0, or {@link #E_LIMIT} when 64 timers are pending or
     *     {@code micros} is negative
     */
    public static int timer(int micros, String method, int context) {
        throw engineOnly();
    }

    /** {@link #table(int, int)}'s part: the LC-trie's nodes. */
    public static final int TABLE_TRIE = 0;
    /** {@link #table(int, int)}'s part: the base vector. */
    public static final int TABLE_BASE = 1;
    /** {@link #table(int, int)}'s part: the prefix vector. */
    public static final int TABLE_PRE = 2;
    /** {@link #table(int, int)}'s part: the next hops. */
    public static final int TABLE_HOPS = 3;
    /**
     * {@link #table(int, int)}'s part: {@code {nhBits, version}}, the bits
     * of an info word naming the next hop and the version (loads of
     * tables into this extension, counted from 1).
     */
    public static final int TABLE_META = 4;

    /**
     * A part of route table {@code n} as the host last loaded it into this
     * extension (an LC-trie: see {@code extensions/router/Router.java}).
     * The arrays are outside the extension's scratch; writing one changes
     * this extension's copy only, until the next load. A load of a newer version replaces them
     * between two invocations, so that an invocation that asks for the
     * parts it needs at its start sees one version throughout.
     *
     * @param n the table's number
     * @param part {@link #TABLE_TRIE}, {@link #TABLE_BASE},
     *     {@link #TABLE_PRE}, {@link #TABLE_HOPS} or {@link #TABLE_META}
     *     (another stops the invocation)
     * @return the part, or null when table {@code n} was never loaded
     */
    public static int[] table(int n, int part) {
        throw engineOnly();
    }

    /**
     * Copy {@code len} bytes of buffer {@code buf} from {@code bufOffset}
     * into this extension's framebuffer {@code fb} at byte
     * {@code fbOffset}: a shared-memory image the host made for this
     * extension, 4 bytes a pixel, row after row ({@link #fbWidth(int)}
     * pixels a row). Every offset and length is checked against the
     * framebuffer and the buffer: a range outside either writes nothing,
     * returns {@link #E_RANGE} and is counted on the framebuffer.
     *
     * @param fb the framebuffer's number (0 or 1, in the order the host
     *     made them)
     * @param fbOffset where in the framebuffer, in bytes
     * @param buf a buffer this invocation holds (another stops it)
     * @param bufOffset where in the buffer, in bytes
     * @param len bytes to copy
     * @return {@code len}, or {@link #E_RANGE}
     */
    public static int fbWrite(int fb, int fbOffset, int buf, int bufOffset, int len) {
        throw engineOnly();
    }

    /**
     * Set {@code len} bytes of this extension's framebuffer {@code fb}
     * from byte {@code fbOffset} to pixel {@code value} (its 4 bytes,
     * little-endian, repeated from {@code fbOffset}): to clear an area a
     * row at a time. Checked as {@link #fbWrite(int, int, int, int, int)}
     * is.
     *
     * @param fb the framebuffer's number
     * @param fbOffset where in the framebuffer, in bytes
     * @param len bytes to set
     * @param value the pixel
     * @return {@code len}, or {@link #E_RANGE}
     */
    public static int fbFill(int fb, int fbOffset, int len, int value) {
        throw engineOnly();
    }

    /**
     * The width of this extension's framebuffer {@code fb}.
     *
     * @param fb the framebuffer's number
     * @return framebuffer {@code fb}'s pixels a row, or {@link #E_RANGE}
     *     when this extension has no such framebuffer
     */
    public static int fbWidth(int fb) {
        throw engineOnly();
    }

    /**
     * The height of this extension's framebuffer {@code fb}.
     *
     * @param fb the framebuffer's number
     * @return framebuffer {@code fb}'s rows, or {@link #E_RANGE} when this
     *     extension has no such framebuffer
     */
    public static int fbHeight(int fb) {
        throw engineOnly();
    }
}
