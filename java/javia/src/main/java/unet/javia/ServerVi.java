package unet.javia;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import static java.lang.foreign.ValueLayout.ADDRESS;

/**
 * Waits for VI connections on a tag (the paper's {@code ServerVi}, after
 * {@code java.net.ServerSocket}): {@link #accept()} returns a new
 * {@link Vi} for each connection that asks for this tag on this host's
 * engine, from this host or another engine's.
 */
public final class ServerVi implements AutoCloseable {
    private final MemorySegment server;
    private final int tag;
    private boolean closed;

    /**
     * Listen on {@code tag} of this host's engine.
     *
     * @param tag the discriminator
     * @throws ViException when another process listens on it, or the engine cannot be reached
     */
    public ServerVi(int tag) throws ViException {
        MemorySegment session = Engine.session();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(ADDRESS);
            int r = (int) Native.LISTEN.invokeExact(session, (long) tag, out);
            if (r != 0) {
                throw Native.failure("listening on tag " + tag, r);
            }
            server = out.get(ADDRESS, 0);
            this.tag = tag;
        } catch (ViException e) {
            throw e;
        } catch (Throwable t) {
            throw Native.fatal(t);
        }
    }

    /** @return the tag it listens on */
    public int tag() {
        return tag;
    }

    /**
     * Wait for the next connection and accept it with the default
     * attributes (its reliability must be the connecting side's).
     *
     * @return the new VI
     * @throws ViException when the connection cannot be made
     */
    public Vi accept() throws ViException {
        return accept(new ViAttributes(), Vi.INFINITE);
    }

    /**
     * Wait at most {@code microseconds} ({@link Vi#INFINITE}: forever) for
     * the next connection and accept it with {@code attr}.
     *
     * @param attr the new VI's attributes
     * @param microseconds how long to wait
     * @return the new VI
     * @throws ViTimeout when no connection came in time
     * @throws ViException when it cannot be made (the reliability levels differ, ...)
     */
    public synchronized Vi accept(ViAttributes attr, int microseconds) throws ViException {
        if (closed) {
            throw new ViException("the ServerVi is closed");
        }
        ViAttributes a = attr == null ? new ViAttributes() : attr;
        MemorySegment handle;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment na = ViSetup.nativeAttrs(arena, a, null, null);
            MemorySegment out = arena.allocate(ADDRESS);
            int r = (int) Native.ACCEPT.invokeExact(server, na, microseconds < 0 ? -1L : (long) microseconds, out);
            if (r == Native.UNET_ETIMEDOUT) {
                throw new ViTimeout(microseconds);
            }
            if (r != 0) {
                throw Native.failure("accepting a VI on tag " + tag, r);
            }
            handle = out.get(ADDRESS, 0);
        } catch (ViException e) {
            throw e;
        } catch (Throwable t) {
            throw Native.fatal(t);
        }
        return new Vi(handle, a, null, null);
    }

    /** Stop listening; VIs accepted live on. */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        try {
            Native.SERVER_FREE.invokeExact(server);
        } catch (Throwable t) {
            throw Native.fatal(t);
        }
    }
}
