package unet.javia;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.ref.Cleaner;
import java.nio.Buffer;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.CharBuffer;
import java.nio.DoubleBuffer;
import java.nio.FloatBuffer;
import java.nio.IntBuffer;
import java.nio.LongBuffer;
import java.nio.ShortBuffer;
import java.util.ArrayList;
import java.util.List;

import static java.lang.foreign.ValueLayout.ADDRESS;

/**
 * Communication memory outside the Java heap (Javia-II): registered with
 * the engine when it is made, so that a VI sends from it and receives into
 * it with no copy in Java or in the library.
 *
 * <p>A Java program cannot place a genuine array in such memory on HotSpot;
 * the paper's {@code toByteArray()}, {@code toIntArray()}, ... return typed
 * views of it instead ({@link ByteBuffer}, {@link IntBuffer}, ..., in the
 * platform's byte order), and {@link #segment()} a {@link MemorySegment}.
 * As the paper requires, the first view fixes the element type for the
 * buffer's life: asking for another type fails.
 *
 * <p>Releasing it, safely: {@link #free(BufferCallback)} keeps the paper's
 * contract, the memory goes back to the engine only once no view of it is
 * reachable, and the callback then runs. {@link #close()} releases it at
 * once: a view used afterwards throws {@link IllegalStateException} instead
 * of touching memory that may have been reused.
 */
public final class ViBuffer implements AutoCloseable {
    private static final Cleaner CLEANER = Cleaner.create();

    private final int size;
    private final MemorySegment region;
    /** The engine's handle of the region (what a reference record names). */
    private final int handle;
    private Arena arena;
    private MemorySegment mem;
    /** The element type of the views, once fixed. */
    private Class<? extends Buffer> viewType;
    private Buffer view;
    private final List<ViBufferTicket> tickets = new ArrayList<>();
    private boolean released;

    /**
     * A buffer of {@code sizeInBytes} bytes, zeroed, registered with this
     * JVM's engine.
     *
     * @param sizeInBytes its size (1 to 2^31 - 1)
     * @throws ViException when the engine refuses it (its memory quota) or cannot be reached
     */
    public ViBuffer(int sizeInBytes) throws ViException {
        if (sizeInBytes < 1) {
            throw new ViException("a ViBuffer of " + sizeInBytes + " bytes: the size must be at least 1");
        }
        this.size = sizeInBytes;
        MemorySegment session = Engine.session();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(ADDRESS);
            int r = (int) Native.REGISTER_MEMORY.invokeExact(session, (long) sizeInBytes, out);
            if (r != 0) {
                throw Native.failure("registering a ViBuffer of " + sizeInBytes + " bytes", r);
            }
            region = out.get(ADDRESS, 0);
            handle = (int) (long) Native.REGION_HANDLE.invokeExact(region);
        } catch (ViException e) {
            throw e;
        } catch (Throwable t) {
            throw Native.fatal(t);
        }
        arena = Arena.ofShared();
        mem = map(region, sizeInBytes, arena);
    }

    // Restricted: a segment from a native address. Sound: the region is
    // `size` bytes long and stays mapped until it is freed, which happens
    // only after `arena` is closed or once no segment of it is reachable.
    @SuppressWarnings("restricted")
    private static MemorySegment map(MemorySegment region, int size, Arena arena) {
        try {
            MemorySegment p = (MemorySegment) Native.REGION_PTR.invokeExact(region);
            return p.reinterpret(size, arena, null);
        } catch (Throwable t) {
            throw Native.fatal(t);
        }
    }

    /** @return its size in bytes */
    public int size() {
        return size;
    }

    /** @return the buffer's memory as bytes (fixes the view type to bytes) */
    public synchronized ByteBuffer toByteArray() {
        return (ByteBuffer) view(ByteBuffer.class);
    }

    /** @return the buffer's memory as chars */
    public synchronized CharBuffer toCharArray() {
        return (CharBuffer) view(CharBuffer.class);
    }

    /** @return the buffer's memory as shorts */
    public synchronized ShortBuffer toShortArray() {
        return (ShortBuffer) view(ShortBuffer.class);
    }

    /** @return the buffer's memory as ints */
    public synchronized IntBuffer toIntArray() {
        return (IntBuffer) view(IntBuffer.class);
    }

    /** @return the buffer's memory as longs */
    public synchronized LongBuffer toLongArray() {
        return (LongBuffer) view(LongBuffer.class);
    }

    /** @return the buffer's memory as floats */
    public synchronized FloatBuffer toFloatArray() {
        return (FloatBuffer) view(FloatBuffer.class);
    }

    /** @return the buffer's memory as doubles */
    public synchronized DoubleBuffer toDoubleArray() {
        return (DoubleBuffer) view(DoubleBuffer.class);
    }

    /**
     * The buffer's memory as a segment (a byte view: it fixes the view type
     * to bytes, as {@link #toByteArray()} does).
     *
     * @return the segment
     */
    public synchronized MemorySegment segment() {
        fix(ByteBuffer.class);
        return mem;
    }

    private void fix(Class<? extends Buffer> type) {
        if (released || mem == null) {
            throw new IllegalStateException("the ViBuffer is freed or closed");
        }
        if (viewType != null && viewType != type) {
            throw new IllegalStateException("this ViBuffer's views are " + viewType.getSimpleName()
                    + " for its life: it cannot be viewed as " + type.getSimpleName());
        }
        viewType = type;
    }

    private Buffer view(Class<? extends Buffer> type) {
        fix(type);
        if (view == null) {
            ByteBuffer b = mem.asByteBuffer().order(ByteOrder.nativeOrder());
            if (type == ByteBuffer.class) {
                view = b;
            } else if (type == CharBuffer.class) {
                view = b.asCharBuffer();
            } else if (type == ShortBuffer.class) {
                view = b.asShortBuffer();
            } else if (type == IntBuffer.class) {
                view = b.asIntBuffer();
            } else if (type == LongBuffer.class) {
                view = b.asLongBuffer();
            } else if (type == FloatBuffer.class) {
                view = b.asFloatBuffer();
            } else {
                view = b.asDoubleBuffer();
            }
        }
        return view;
    }

    /**
     * Register the buffer with {@code vi} (the paper's {@code register}):
     * the ticket posts it on that VI. A buffer may be registered with
     * several VIs at once.
     *
     * @param vi the VI
     * @param attr its attributes (may be null)
     * @return the ticket
     * @throws IOException when the buffer is freed or closed
     */
    public synchronized ViBufferTicket register(Vi vi, ViBufferAttributes attr) throws IOException {
        if (vi == null) {
            throw new ViException("the Vi is null");
        }
        if (released || mem == null) {
            throw new ViException("the ViBuffer is freed or closed");
        }
        ViBufferTicket t = new ViBufferTicket(this, vi, mem);
        tickets.add(t);
        return t;
    }

    /**
     * {@link #register(Vi, ViBufferAttributes)} with the default buffer
     * attributes: the paper's sample code passes the VI's attributes here.
     *
     * @param vi the VI
     * @param attr the VI's attributes (not used: buffers take the defaults)
     * @return the ticket
     * @throws IOException when the buffer is freed or closed
     */
    public ViBufferTicket register(Vi vi, ViAttributes attr) throws IOException {
        return register(vi, new ViBufferAttributes());
    }

    /**
     * Undo {@link #register}: fails while the ticket is posted (its
     * descriptor may still use the memory).
     *
     * @param ticket a ticket of this buffer
     * @throws IOException when it is posted, or not this buffer's
     */
    public synchronized void unregister(ViBufferTicket ticket) throws IOException {
        if (ticket == null || ticket.buffer != this || !ticket.registered) {
            throw new ViException("not a registered ticket of this ViBuffer");
        }
        if (!ticket.vi.unregisterIfIdle(ticket)) {
            throw new ViException("the ViBuffer is still in use: its ticket is posted on a Vi (wait for it first)");
        }
        tickets.remove(ticket);
    }

    /** The library's handle of the buffer's region. */
    MemorySegment region() {
        return region;
    }

    /** The engine's number of the buffer's region. */
    int regionHandle() {
        return handle;
    }

    /**
     * Free the buffer, keeping the paper's contract: the memory goes back
     * to the engine only once no view of it is reachable (drop every view
     * first); then {@code cb} (may be null) runs, on a cleaner thread.
     *
     * @param cb told when the buffer is released
     * @throws ViException when a ticket is still registered
     */
    public synchronized void free(BufferCallback cb) throws ViException {
        if (released || mem == null) {
            throw new ViException("the ViBuffer is already freed or closed");
        }
        if (!tickets.isEmpty()) {
            throw new ViException("the ViBuffer is still registered with " + tickets.size()
                    + " Vi(s): unregister its tickets first");
        }
        released = true;
        // Watch the scope every view holds: once none is reachable, nobody
        // can touch the memory, and it may go back to the engine.
        Object scope = mem.scope();
        mem = null;
        view = null;
        arena = null;
        CLEANER.register(scope, new Release(region, size, cb));
    }

    /**
     * Release the buffer at once: views used afterwards throw
     * {@link IllegalStateException}. Fails silently never: a registered
     * ticket makes it throw.
     *
     * @throws ViException when a ticket is still registered
     */
    @Override
    public synchronized void close() throws ViException {
        if (released || mem == null) {
            return;
        }
        if (!tickets.isEmpty()) {
            throw new ViException("the ViBuffer is still registered with " + tickets.size()
                    + " Vi(s): unregister its tickets first");
        }
        released = true;
        arena.close();
        mem = null;
        view = null;
        new Release(region, size, null).run();
    }

    /** Gives a region back to the engine, then tells the callback. */
    private record Release(MemorySegment region, int size, BufferCallback cb) implements Runnable {
        @Override
        public void run() {
            try {
                Native.REGION_FREE.invokeExact(region);
            } catch (Throwable t) {
                throw Native.fatal(t);
            }
            if (cb != null) {
                cb.released(size);
            }
        }
    }
}
