package unet.javia;

/**
 * A {@link ViBuffer} registered with a {@link Vi} (the paper's Javia-II
 * descriptor): posted with {@link Vi#sendBufPost} or {@link Vi#recvBufPost}
 * and returned, done, by {@link Vi#sendBufWait} or {@link Vi#recvBufWait}.
 * Its state is published to any thread that reads {@link #isDone()}
 * without a lock.
 */
public final class ViBufferTicket {
    final ViBuffer buffer;
    final Vi vi;
    private int length;
    private String error;
    private volatile boolean done;
    /** Posted on its VI (under the VI's lock). */
    boolean posted;
    /** Registered: cleared under the buffer's lock and the VI's, while not posted. */
    boolean registered = true;

    ViBufferTicket(ViBuffer b, Vi vi) {
        this.buffer = b;
        this.vi = vi;
    }

    /** @return true once the send or receive completed */
    public boolean isDone() {
        return done;
    }

    /** @return the length of the message sent or received (valid once done) */
    public int getLength() {
        return length;
    }

    /** @return the VI error it completed with ({@code UNET_VI_PEER_GONE}, ...), or null */
    public String getError() {
        return error;
    }

    /** @return the buffer */
    public ViBuffer getBuffer() {
        return buffer;
    }

    void reset() {
        done = false;
        error = null;
        length = 0;
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
}
