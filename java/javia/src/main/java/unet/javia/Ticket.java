package unet.javia;

/**
 * What the two kinds of ticket share: whether the send or receive is done,
 * the message's length and the VI error it failed with. Written under the
 * VI's lock; {@code done} is written last (volatile), so a thread that
 * reads {@link #isDone()} true without a lock sees the rest.
 */
abstract class Ticket {
    private int length;
    private String error;
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
        done = true;
    }

    void fail(String why) {
        length = 0;
        error = why;
        posted = false;
        done = true;
    }

    void reset() {
        done = false;
        error = null;
        length = 0;
    }
}
