package unet.javia;

/**
 * How a {@link Vi} is made: its reliability level (both ends must ask for
 * the same one), VIA's strict receiver-not-ready behaviour, the depth of
 * its queues, and the buffers Javia-I copies through. {@code new
 * ViAttributes()} gives the defaults; the setters return this.
 */
public final class ViAttributes {
    /** The reliability levels of VIA. */
    public enum Reliability {
        /** A message may be lost (losses are counted); a send completes once it has left. */
        UNRELIABLE,
        /** Every message arrives once and in order, or the VI breaks; a send completes once it arrived. */
        RELIABLE_DELIVERY,
        /** As delivery, and a send completes only once the message is in a buffer the receiver posted. */
        RELIABLE_RECEPTION
    }

    private Reliability reliability = Reliability.RELIABLE_DELIVERY;
    private boolean strictRnr;
    private int queueDepth = 64;
    private int maxMessageSize = 64 * 1024;
    private int spinMicros = 50;
    private int inPlaceFrom = IN_PLACE_FROM;
    private boolean confined;
    private int breakTimeoutMillis;

    /**
     * The default of {@link #setInPlaceFrom}: messages of this many bytes
     * or more are sent in place by {@link Vi#send}.
     */
    public static final int IN_PLACE_FROM = 0;

    /** The defaults: reliable delivery, 64 descriptors a queue, messages of up to 64 KiB. */
    public ViAttributes() {}

    /** @return the reliability level */
    public Reliability getReliability() {
        return reliability;
    }

    /**
     * @param r the reliability level
     * @return this
     */
    public ViAttributes setReliability(Reliability r) {
        if (r == null) {
            throw new IllegalArgumentException("reliability is null");
        }
        this.reliability = r;
        return this;
    }

    /** @return whether a message that finds no receive posted breaks the VI */
    public boolean isStrictRnr() {
        return strictRnr;
    }

    /**
     * VIA's strict behaviour: a message that finds no receive posted breaks
     * the VI. By default the engine holds it until a receive is posted.
     *
     * @param strict true for VIA's behaviour
     * @return this
     */
    public ViAttributes setStrictRnr(boolean strict) {
        this.strictRnr = strict;
        return this;
    }

    /** @return descriptors each queue holds */
    public int getQueueDepth() {
        return queueDepth;
    }

    /**
     * Descriptors each queue holds (1 to 4096): also the messages Javia-I
     * keeps in flight through its own buffers.
     *
     * @param n the depth
     * @return this
     */
    public ViAttributes setQueueDepth(int n) {
        if (n < 1 || n > 4096) {
            throw new IllegalArgumentException("queue depth " + n + " is not in 1..4096");
        }
        this.queueDepth = n;
        return this;
    }

    /** @return the longest message Javia-I sends or receives, in bytes */
    public int getMaxMessageSize() {
        return maxMessageSize;
    }

    /**
     * The longest message Javia-I's copying calls carry (1 byte to 256 KiB,
     * the most a VI carries): the size of each of its buffers.
     *
     * @param n bytes
     * @return this
     */
    public ViAttributes setMaxMessageSize(int n) {
        if (n < 1 || n > Vi.MAX_TRANSFER) {
            throw new IllegalArgumentException("max message size " + n + " is not in 1.." + Vi.MAX_TRANSFER);
        }
        this.maxMessageSize = n;
        return this;
    }

    /** @return microseconds a wait spins before it sleeps */
    public int getSpinMicros() {
        return spinMicros;
    }

    /**
     * @param us microseconds a wait spins before it sleeps (0 or more)
     * @return this
     */
    public ViAttributes setSpinMicros(int us) {
        if (us < 0) {
            throw new IllegalArgumentException("spin " + us + " us is negative");
        }
        this.spinMicros = us;
        return this;
    }

    /** @return the size from which {@link Vi#send} sends in place */
    public int getInPlaceFrom() {
        return inPlaceFrom;
    }

    /**
     * Messages of at least {@code bytes} bytes are sent by {@link Vi#send}
     * as {@link Vi#sendInPlace} does: the array handed to the library for
     * the call, the bytes moved once (Javia-I's second mode; the paper pins
     * the array). {@code Integer.MAX_VALUE}: always copy through Javia-I's
     * own buffers first.
     *
     * @param bytes the size (0 or more)
     * @return this
     */
    public ViAttributes setInPlaceFrom(int bytes) {
        if (bytes < 0) {
            throw new IllegalArgumentException("in-place size " + bytes + " is negative");
        }
        this.inPlaceFrom = bytes;
        return this;
    }

    /** @return whether the VI is confined to the thread that makes it */
    public boolean isConfined() {
        return confined;
    }

    /**
     * Confine the VI to the thread that makes it (the constructor's, or
     * {@link ServerVi#accept}'s), as {@code Arena.ofConfined()} confines
     * memory: its calls then take no lock, and a call from any other
     * thread (close and unregistering its buffers' tickets included)
     * throws {@link WrongThreadException}, changing nothing. For a VI that
     * one thread drives, as a latency-bound loop does (Aeron's exclusive
     * publications are the same trade). The default, false: any thread
     * may call, a lock orders the calls.
     *
     * @param confined whether to confine it
     * @return this
     */
    public ViAttributes setConfined(boolean confined) {
        this.confined = confined;
        return this;
    }

    /** @return milliseconds a silent peer may keep the VI waiting before it breaks (0: the engine's) */
    public int getBreakTimeoutMillis() {
        return breakTimeoutMillis;
    }

    /**
     * How long the peer of a VI carried between engines may stay silent
     * while the VI waits for it (the reliable levels) before the VI breaks
     * with a timeout. 0, the default: the engine's setting (5 s unless its
     * daemon says otherwise).
     *
     * @param ms milliseconds (0 or more)
     * @return this
     */
    public ViAttributes setBreakTimeoutMillis(int ms) {
        if (ms < 0) {
            throw new IllegalArgumentException("break timeout " + ms + " ms is negative");
        }
        this.breakTimeoutMillis = ms;
        return this;
    }

    ViAttributes copy() {
        ViAttributes a = new ViAttributes();
        a.reliability = reliability;
        a.strictRnr = strictRnr;
        a.queueDepth = queueDepth;
        a.maxMessageSize = maxMessageSize;
        a.spinMicros = spinMicros;
        a.inPlaceFrom = inPlaceFrom;
        a.confined = confined;
        a.breakTimeoutMillis = breakTimeoutMillis;
        return a;
    }
}
