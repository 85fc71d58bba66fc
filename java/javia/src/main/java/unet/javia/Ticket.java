package unet.javia;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * What the two kinds of ticket share: whether the send or receive is done,
 * the message's length and the VI error it failed with. Written under the
 * VI's lock; {@code done} is written last with a release store, so a
 * thread that reads {@link #isDone()} true without a lock (a volatile
 * read) sees the rest. A release store, not a volatile one: the data
 * path completes and posts tickets several times a message, and a volatile
 * store costs a full fence each time.
 */
abstract class Ticket {
    private static final VarHandle DONE = VarHandles.field(MethodHandles.lookup(), "done", boolean.class);

    private int length;
    private String error;
    /** Read volatile; written through {@link #DONE} (release, or opaque when cleared). */
    private volatile boolean done;
    /** Posted on its VI (under the VI's lock). */
    boolean posted;

    /** @return true once the send or receive completed */
    public boolean isDone() {
        return done;
    }

    /** @return the length of the message sent or received (valid once done) */
    public int getLength() {
        return length;
    }

    /**
     * Why it failed ({@code UNET_VI_PEER_GONE}, ...), or null when it
     * succeeded or is not done.
     *
     * @return the VI error's name, or null
     */
    public String getError() {
        return error;
    }

    void complete(int len) {
        length = len;
        error = null;
        posted = false;
        DONE.setRelease(this, true);
    }

    void fail(String why) {
        length = 0;
        error = why;
        posted = false;
        DONE.setRelease(this, true);
    }

    void reset() {
        // Not done first, then the rest: a reader that still sees done
        // sees the old length and error.
        DONE.setOpaque(this, false);
        VarHandle.storeStoreFence();
        error = null;
        length = 0;
    }
}
