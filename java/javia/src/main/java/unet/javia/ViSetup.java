package unet.javia;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;

/**
 * The set-up of a VI in the library: its native attributes, the connect
 * call, the regions a VI registers for Javia-I's buffers, and the close of
 * its handle.
 */
final class ViSetup {
    private ViSetup() {
    }

    /** Fill a native {@code unet_vi_attrs} from {@code a}. */
    static MemorySegment nativeAttrs(Arena arena, ViAttributes a, ViCompletionQ sendQ, ViCompletionQ recvQ)
            throws ViException {
        MemorySegment na = arena.allocate(Native.VI_ATTRS);
        try {
            int r = (int) Native.ATTRS_INIT.invokeExact(na);
            if (r != 0) {
                throw Native.failure("unet_vi_attrs_init", r);
            }
        } catch (ViException e) {
            throw e;
        } catch (Throwable t) {
            throw Native.fatal(t);
        }
        na.set(JAVA_INT, 0, a.getReliability().ordinal());
        na.set(JAVA_INT, 4, a.isStrictRnr() ? 1 : 0);
        na.set(JAVA_INT, 8, a.getQueueDepth());
        na.set(JAVA_INT, 12, a.getQueueDepth());
        na.set(JAVA_INT, 16, a.getSpinMicros());
        na.set(JAVA_INT, 20, a.getBreakTimeoutMillis());
        na.set(ADDRESS, 24, sendQ == null ? MemorySegment.NULL : sendQ.cq);
        na.set(ADDRESS, 32, recvQ == null ? MemorySegment.NULL : recvQ.cq);
        return na;
    }

    /** Connect a VI to whoever waits on {@code tag} at {@code mach}: its handle. */
    static MemorySegment connect(ViAddress mach, ViAttributes attr, ViCompletionQ sendQ,
            ViCompletionQ recvQ, int tag) throws ViException {
        if (mach == null) {
            throw new ViException("the ViAddress is null");
        }
        MemorySegment session = Engine.session();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment na = nativeAttrs(a, attr, sendQ, recvQ);
            MemorySegment host = mach.isLocal() ? MemorySegment.NULL : a.allocateFrom(mach.toString());
            MemorySegment out = a.allocate(ADDRESS);
            int r = (int) Native.CONNECT.invokeExact(session, host, (long) tag, na, -1L, out);
            if (r != 0) {
                throw Native.failure("connecting a VI to tag " + tag + " at " + mach, r);
            }
            return out.get(ADDRESS, 0);
        } catch (ViException e) {
            throw e;
        } catch (Throwable t) {
            throw Native.fatal(t);
        }
    }

    /** Register {@code bytes} bytes of memory with the engine: the region. */
    static MemorySegment register(long bytes) throws ViException {
        MemorySegment session = Engine.session();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(ADDRESS);
            int r = (int) Native.REGISTER_MEMORY.invokeExact(session, bytes, out);
            if (r != 0) {
                throw Native.failure("registering " + bytes + " bytes", r);
            }
            return out.get(ADDRESS, 0);
        } catch (ViException e) {
            throw e;
        } catch (Throwable t) {
            throw Native.fatal(t);
        }
    }

    /** The memory of region {@code r}, valid until {@code arena} (the VI's) closes. */
    // Restricted: a segment from a native address. Sound: the region is
    // `bytes` long (registered so above) and stays mapped until it is freed
    // in Vi.close(), after the arena that bounds every access is closed.
    @SuppressWarnings("restricted")
    static MemorySegment regionMemory(Arena arena, MemorySegment r, long bytes) {
        try {
            MemorySegment p = (MemorySegment) Native.REGION_PTR.invokeExact(r);
            return p.reinterpret(bytes, arena, null);
        } catch (Throwable t) {
            throw Native.fatal(t);
        }
    }

    /** Give region {@code r} back to the engine. */
    static void freeRegion(MemorySegment r) {
        try {
            Native.REGION_FREE.invokeExact(r);
        } catch (Throwable t) {
            throw Native.fatal(t);
        }
    }

    /** Close the VI handle {@code vi} in the library. */
    static void closeHandle(MemorySegment vi) {
        try {
            int ignored = (int) Native.VI_CLOSE.invokeExact(vi);
            assert ignored <= 0;
        } catch (Throwable t) {
            throw Native.fatal(t);
        }
    }
}
