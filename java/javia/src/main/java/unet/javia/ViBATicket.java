package unet.javia;

/**
 * A descriptor for a byte array (Javia-I's asynchronous receive): the array
 * a message is copied into, from {@code off}, and, once done, the message's
 * length. A ticket is posted with {@link Vi#recvPost} and comes back from
 * {@link Vi#recvWait}; its state is published safely to any thread that
 * reads {@link #isDone()}.
 */
public final class ViBATicket {
    private final byte[] array;
    private final int off;
    private int length;
    private String error;
    private volatile boolean done;
    boolean posted;

    /**
     * A ticket for {@code b} from {@code off}.
     *
     * @param b the array
     * @param off where the message goes in it
     */
    public ViBATicket(byte[] b, int off) {
        if (b == null) {
            throw new IllegalArgumentException("the byte array is null");
        }
        if (off < 0 || off > b.length) {
            throw new IllegalArgumentException("offset " + off + " is outside an array of " + b.length);
        }
        this.array = b;
        this.off = off;
    }

    /** @return true once the receive completed */
    public boolean isDone() {
        return done;
    }

    /** @return the length of the message received (valid once done) */
    public int getLength() {
        return length;
    }

    /** @return the array the message was copied into */
    public byte[] getByteArray() {
        return array;
    }

    /** @return where the message starts in the array */
    public int getOffset() {
        return off;
    }

    int room() {
        return array.length - off;
    }

    /**
     * Why the receive failed ({@code UNET_VI_PEER_GONE}, ...), or null when
     * it succeeded or is not done.
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
