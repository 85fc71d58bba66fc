package unet.javia;

/**
 * A descriptor for a byte array (Javia-I's asynchronous receive): the array
 * a message is copied into, from {@code off}, and, once done, the message's
 * length. A ticket is posted with {@link Vi#recvPost} and comes back from
 * {@link Vi#recvWait}; its state is published safely to any thread that
 * reads {@link #isDone()}.
 */
public final class ViBATicket extends Ticket {
    private final byte[] array;
    private final int off;

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
}
