package unet.javia.bench;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import unet.javia.ServerVi;
import unet.javia.Vi;
import unet.javia.ViAddress;
import unet.javia.ViAttributes;
import unet.javia.ViBATicket;
import unet.javia.ViBuffer;
import unet.javia.ViBufferTicket;
import unet.javia.ViException;

/** The Javia ends of a benchmark run: Javia-I (copying or in place) and Javia-II. */
final class JaviaPeers {
    private JaviaPeers() {}

    /** Receives kept posted by a receiving end. */
    static final int POSTED = 16;

    static ViAttributes attrs(JaviaBench.Plan plan, boolean inPlace) {
        return new ViAttributes()
                .setMaxMessageSize(Math.max(1, plan.max()))
                .setInPlaceFrom(inPlace ? 0 : Integer.MAX_VALUE)
                .setConfined(plan.confined);
    }

    /** The connected VI: {@code ping} connects to {@code plan.addr}, pong accepts. */
    static Vi connect(boolean ping, JaviaBench.Plan plan, ViAttributes attrs) throws IOException {
        if (ping) {
            return new Vi(new ViAddress(plan.addr), attrs, null, null, plan.tag);
        }
        try (ServerVi sv = new ServerVi(plan.tag)) {
            JaviaBench.ready();
            return sv.accept(attrs, Vi.INFINITE);
        }
    }

    static JaviaBench.Peer javiaI(boolean ping, JaviaBench.Plan plan, boolean inPlace) throws IOException {
        ViAttributes attrs = attrs(plan, inPlace);
        return new JaviaI(connect(ping, plan, attrs), plan.max(), inPlace, plan.read);
    }

    static JaviaBench.Peer javiaII(boolean ping, JaviaBench.Plan plan) throws IOException {
        ViAttributes attrs = attrs(plan, false);
        return new JaviaII(connect(ping, plan, attrs), attrs, plan.max(), plan.read);
    }

    /** Javia-I: byte arrays, copied by {@code send} or handed over by {@code sendInPlace}. */
    static final class JaviaI implements JaviaBench.Peer {
        private final Vi vi;
        private final boolean inPlace;
        private final byte[] msg;
        private byte[] last;
        /** The ticket of the last message received, posted again after the next send. */
        private ViBATicket toRepost;
        /** Read every message received ({@link JaviaBench.Plan#read}), summing it here. */
        private final boolean read;
        private long sum;

        JaviaI(Vi vi, int max, boolean inPlace, boolean read) throws ViException {
            this.vi = vi;
            this.inPlace = inPlace;
            this.read = read;
            this.msg = new byte[max];
            for (int i = 0; i < POSTED; i++) {
                vi.recvPost(new ViBATicket(new byte[max], 0));
            }
        }

        @Override
        public void fill(int size) {
            for (int i = 0; i < size; i++) {
                msg[i] = JaviaBench.pattern(size, i);
            }
        }

        private void sendFrom(byte[] b, int off, int len) throws ViException {
            if (inPlace) {
                vi.sendInPlace(b, off, len);
            } else {
                vi.send(b, off, len);
            }
        }

        @Override
        public void send(int size) throws ViException {
            sendFrom(msg, 0, size);
            repostLast();
        }

        /** Posts the last message's ticket again (after a send: off the round trip's path). */
        private void repostLast() throws ViException {
            if (toRepost != null) {
                vi.recvPost(toRepost);
                toRepost = null;
            }
        }

        @Override
        public int recv() throws ViException {
            repostLast();
            ViBATicket t = vi.recvWait(Vi.INFINITE);
            last = t.getByteArray();
            toRepost = t;
            if (read) {
                sum += JaviaBench.sum(last, t.getOffset(), t.getLength());
            }
            return t.getLength();
        }

        @Override
        public int echo() throws ViException {
            repostLast();
            ViBATicket t = vi.recvWait(Vi.INFINITE);
            int len = t.getLength();
            if (len > 0) {
                sendFrom(t.getByteArray(), t.getOffset(), len);
            }
            vi.recvPost(t);
            return len;
        }

        @Override
        public void burst(int size, int n) throws ViException {
            for (int i = 0; i < n; i++) {
                sendFrom(msg, 0, size);
            }
        }

        @Override
        public void drain(int n) throws ViException {
            for (int i = 0; i < n; i++) {
                ViBATicket t = vi.recvWait(Vi.INFINITE);
                if (read) {
                    sum += JaviaBench.sum(t.getByteArray(), t.getOffset(), t.getLength());
                }
                vi.recvPost(t);
            }
        }

        @Override
        public boolean echoed(int size) {
            // The ticket was posted again, but nothing arrives until the next send.
            return last != null && java.util.Arrays.equals(last, 0, size, msg, 0, size);
        }

        @Override
        public void close() {
            JaviaBench.sums += sum;
            vi.close();
        }
    }

    /**
     * Javia-II: registered buffers sent and received without a copy in
     * Java. Sends complete lazily, as the Rust end's do: the oldest is
     * waited for only when {@code POSTED} are outstanding (or, echoing,
     * half of them), and an echoed buffer is posted for receiving again
     * once its send completed. A message goes out first; completed sends
     * are taken back, and the last message's buffer is posted again, after
     * it, while it travels.
     */
    static final class JaviaII implements JaviaBench.Peer {
        private final Vi vi;
        private final ViBuffer[] in = new ViBuffer[POSTED];
        private final ViBufferTicket[] inT = new ViBufferTicket[POSTED];
        private final ViBuffer[] out = new ViBuffer[POSTED];
        private final ViBufferTicket[] outT = new ViBufferTicket[POSTED];
        /** Outstanding sends, oldest first, and whether each is an echo. */
        private final boolean[] echoRing = new boolean[POSTED];
        private int head;
        private int pending;
        private int next;
        private ViBufferTicket last;
        /** The buffer of the last message received, posted again after the next send. */
        private ViBufferTicket toRepost;
        /** Read every message received ({@link JaviaBench.Plan#read}), summing it here. */
        private final boolean read;
        private long sum;
        /** The receive buffers' memory, as a program keeps it (asking a buffer for it takes its monitor). */
        private final MemorySegment[] inSeg = new MemorySegment[POSTED];
        /** Where the next receive's ticket is looked for first in {@link #inT} (they come back in turn). */
        private int nextIn;

        JaviaII(Vi vi, ViAttributes attrs, int max, boolean read) throws IOException {
            this.vi = vi;
            this.read = read;
            for (int i = 0; i < POSTED; i++) {
                in[i] = new ViBuffer(max);
                inSeg[i] = in[i].segment();
                inT[i] = in[i].register(vi, attrs);
                vi.recvBufPost(inT[i], 0);
                out[i] = new ViBuffer(max);
                outT[i] = out[i].register(vi, attrs);
            }
        }

        /** The memory of receive ticket {@code t}. */
        private MemorySegment memoryOf(ViBufferTicket t) {
            for (int k = 0; k < POSTED; k++) {
                int i = (nextIn + k) % POSTED;
                if (inT[i] == t) {
                    nextIn = (i + 1) % POSTED;
                    return inSeg[i];
                }
            }
            throw new IllegalStateException("a receive came into a buffer this end did not post");
        }

        /** Waits for the oldest outstanding send; an echoed buffer is posted again. */
        private void completeOne() throws ViException {
            ViBufferTicket t = vi.sendBufWait(Vi.INFINITE);
            if (t.getError() != null) {
                throw new ViException("a send failed: " + t.getError());
            }
            boolean echo = echoRing[head];
            head = (head + 1) % POSTED;
            pending--;
            if (echo) {
                vi.recvBufPost(t, 0);
            }
        }

        private void posted(boolean echo) {
            echoRing[(head + pending) % POSTED] = echo;
            pending++;
        }

        @Override
        public void fill(int size) throws ViException {
            while (pending > 0) {
                completeOne();
            }
            for (ViBuffer b : out) {
                MemorySegment s = b.segment();
                for (int i = 0; i < size; i++) {
                    s.set(ValueLayout.JAVA_BYTE, i, JaviaBench.pattern(size, i));
                }
            }
        }

        @Override
        public void send(int size) throws ViException {
            // At most POSTED - 1 outstanding here (see below), so the ticket
            // sent POSTED sends ago is done and taken back.
            vi.sendBufPost(outT[next++ % POSTED], 0, size);
            posted(false);
            repostLast();
            if (pending == POSTED) {
                completeOne();
            }
        }

        /** Posts the last message's buffer again (after a send: off the round trip's path). */
        private void repostLast() throws ViException {
            if (toRepost != null) {
                vi.recvBufPost(toRepost, 0);
                toRepost = null;
            }
        }

        @Override
        public int recv() throws ViException {
            repostLast();
            ViBufferTicket t = vi.recvBufWait(Vi.INFINITE);
            last = t;
            toRepost = t;
            if (read) {
                sum += JaviaBench.sum(memoryOf(t), 0, t.getLength());
            }
            return t.getLength();
        }

        @Override
        public int echo() throws ViException {
            repostLast();
            ViBufferTicket t = vi.recvBufWait(Vi.INFINITE);
            int len = t.getLength();
            if (len == 0) {
                vi.recvBufPost(t, 0);
                return 0;
            }
            // At most POSTED - 1 outstanding here: send() and echo() both
            // leave no more, so the ring has an entry free for this one.
            vi.sendBufPost(t, 0, len);
            posted(true);
            // Down to half: the bursts' acknowledgements may still be
            // outstanding before the first echoes, and each echo's buffer
            // is posted again only once its send is taken back.
            while (pending >= POSTED / 2) {
                completeOne();
            }
            return len;
        }

        @Override
        public void burst(int size, int n) throws ViException {
            for (int i = 0; i < n; i++) {
                send(size);
            }
        }

        @Override
        public void drain(int n) throws ViException {
            for (int i = 0; i < n; i++) {
                ViBufferTicket t = vi.recvBufWait(Vi.INFINITE);
                if (read) {
                    sum += JaviaBench.sum(memoryOf(t), 0, t.getLength());
                }
                vi.recvBufPost(t, 0);
            }
        }

        @Override
        public boolean echoed(int size) {
            // Posted again, but nothing arrives until the next send.
            return last != null && MemorySegment.mismatch(
                    last.getBuffer().segment(), 0, size, out[0].segment(), 0, size) == -1;
        }

        @Override
        public void close() throws IOException {
            while (pending > 0) {
                completeOne();
            }
            JaviaBench.sums += sum;
            vi.close();
        }
    }
}
