package unet.javia;

import java.lang.foreign.MemorySegment;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;

/**
 * Javia-I's buffers of a VI: {@code depth} slots of {@code slot} bytes each
 * way, in two regions registered with the engine when the VI is made, that
 * byte arrays are copied through; with the tickets of byte arrays posted
 * for receives ({@code recvPost}). A slot's descriptor id is its index.
 * Everything here runs under the VI's lock.
 */
final class CopyBuffers {
    private final LibraryQueues queues;
    /** The bytes of one slot: the VI's largest message. */
    final int slot;
    /** Javia-I sends of this many bytes or more go in place. */
    final int inPlaceFrom;
    final MemorySegment sendRegion;
    final MemorySegment recvRegion;
    private final MemorySegment sendMem;
    private final MemorySegment recvMem;
    private final int[] sendFree;
    private int sendFreeN;
    private final int[] recvFree;
    private int recvFreeN;
    /** The ticket each receive slot is posted for; null: posted for recv(). */
    private final ViBATicket[] recvTickets;
    /** Byte-array tickets posted ({@code recvPost}). */
    int ticketsPosted;
    /** Slots posted for {@code recv}. */
    int internalPosted;

    /**
     * {@code depth} slots of {@code slot} bytes each way, in the regions
     * {@code sendRegion} and {@code recvRegion} (their memory {@code
     * sendMem} and {@code recvMem}), posted through {@code queues}.
     */
    CopyBuffers(LibraryQueues queues, int depth, int slot, int inPlaceFrom, MemorySegment sendRegion,
            MemorySegment recvRegion, MemorySegment sendMem, MemorySegment recvMem) {
        this.queues = queues;
        this.slot = slot;
        this.inPlaceFrom = inPlaceFrom;
        this.sendRegion = sendRegion;
        this.recvRegion = recvRegion;
        this.sendMem = sendMem;
        this.recvMem = recvMem;
        sendFree = new int[depth];
        recvFree = new int[depth];
        for (int i = 0; i < depth; i++) {
            sendFree[i] = depth - 1 - i;
            recvFree[i] = depth - 1 - i;
        }
        sendFreeN = depth;
        recvFreeN = depth;
        recvTickets = new ViBATicket[depth];
    }

    /** Throws unless {@code len} bytes from {@code off} fit array {@code b}. */
    static void checkRange(byte[] b, int off, int len) throws ViException {
        if (b == null) {
            throw new ViException("the byte array is null");
        }
        if (off < 0 || len < 0 || off > b.length - len) {
            throw new ViException("offset " + off + " and length " + len + " do not fit an array of " + b.length);
        }
    }

    /** Whether every send slot carries a message not yet complete. */
    boolean noSendFree() {
        return sendFreeN == 0;
    }

    /** Whether no send slot carries a message not yet complete. */
    boolean sendsDone() {
        return sendFreeN == sendFree.length;
    }

    /** A free send slot, taken (there is one: {@link #noSendFree}). */
    int takeSend() {
        return sendFree[--sendFreeN];
    }

    /** Send slot {@code s} free again (its message completed). */
    void freeSend(int s) {
        sendFree[sendFreeN++] = s;
    }

    /**
     * Send {@code len} bytes of {@code b} from {@code off} as slot {@code
     * s}'s message: straight from the array if {@code inPlace} and the
     * library can now, else copied into the slot.
     */
    void send(int s, byte[] b, int off, int len, boolean inPlace) throws ViException {
        if (!inPlace || !sendCopied(s, b, off, len)) {
            long at = (long) s * slot;
            MemorySegment.copy(b, off, sendMem, JAVA_BYTE, at, len);
            postSend(s, at, len);
        }
    }

    private void postSend(int s, long at, int len) throws ViException {
        int r = queues.postSend(s, sendRegion, at, len);
        if (r != 0) {
            sendFree[sendFreeN++] = s;
            throw Native.failure("posting a send", r);
        }
    }

    /**
     * Sends {@code len} bytes of {@code b} straight from the array, as
     * buffer {@code s}'s message (its completion frees {@code s}); false
     * when the library cannot now (nothing sent, {@code s} still taken).
     */
    private boolean sendCopied(int s, byte[] b, int off, int len) throws ViException {
        int r = queues.sendCopied(s, b, off, len);
        if (r == 0) {
            return true;
        }
        if (r == Native.UNET_EFULL) {
            return false;
        }
        sendFree[sendFreeN++] = s;
        throw Native.failure("sending in place", r);
    }

    /** How many receive slots there are. */
    int recvSlots() {
        return recvFree.length;
    }

    /** Whether every receive slot is posted. */
    boolean noRecvFree() {
        return recvFreeN == 0;
    }

    /** Post every free receive slot for {@code recv}. */
    void postForRecv() throws ViException {
        while (recvFreeN > 0) {
            int s = recvFree[--recvFreeN];
            recvTickets[s] = null;
            postRecv(s, slot);
            internalPosted++;
        }
    }

    /** Post a free receive slot for {@code t} (there is one: {@link #noRecvFree}). */
    void postFor(ViBATicket t) throws ViException {
        int s = recvFree[--recvFreeN];
        recvTickets[s] = t;
        t.reset();
        t.posted = true;
        ticketsPosted++;
        postRecv(s, Math.min(slot, t.room()));
    }

    private void postRecv(int s, int len) throws ViException {
        int r = queues.postRecv(s, recvRegion, (long) s * slot, len);
        if (r != 0) {
            throw Native.failure("posting a receive", r);
        }
    }

    /** Receive slot {@code s}, posted for {@code recv}, completed: free again. */
    void recvTaken(int s) {
        internalPosted--;
        recvFree[recvFreeN++] = s;
    }

    /** The {@code len} bytes slot {@code s} received, in a new array. */
    byte[] copyOut(int s, int len) {
        byte[] b = new byte[len];
        MemorySegment.copy(recvMem, JAVA_BYTE, (long) s * slot, b, 0, len);
        return b;
    }

    /** Receive slot {@code s}, posted for a ticket, completed: its ticket; the slot free again. */
    ViBATicket ticketTaken(int s) {
        ViBATicket t = recvTickets[s];
        recvTickets[s] = null;
        recvFree[recvFreeN++] = s;
        ticketsPosted--;
        return t;
    }

    /** The {@code len} bytes slot {@code s} received, into {@code t}'s array. */
    void copyInto(int s, ViBATicket t, int len) {
        MemorySegment.copy(recvMem, JAVA_BYTE, (long) s * slot, t.getByteArray(), t.getOffset(), len);
    }

    /** A broken VI completes nothing more: every ticket posted is done, with {@code reason}. */
    void failAll(String reason) {
        for (int i = 0; i < recvTickets.length; i++) {
            if (recvTickets[i] != null) {
                recvTickets[i].fail(reason);
                recvTickets[i] = null;
                recvFree[recvFreeN++] = i;
                ticketsPosted--;
            }
        }
    }

    /** On close: every ticket still posted done with {@code UNET_VI_CLOSED}. */
    void failClosed() {
        for (int i = 0; i < recvTickets.length; i++) {
            if (recvTickets[i] != null) {
                recvTickets[i].fail("UNET_VI_CLOSED");
                recvTickets[i] = null;
            }
        }
    }
}
