package unet.javia;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import static java.lang.foreign.ValueLayout.ADDRESS;

/**
 * The JVM's session with its engine: one connection to the control socket
 * named by {@code UNET_SOCKET} ({@code /tmp/unet.sock} when it is not set),
 * made on first use and kept for the JVM's life.
 */
final class Engine {
    private Engine() {}

    private static MemorySegment session;

    /** Where the engine is looked for. */
    static String socket() {
        String s = System.getenv("UNET_SOCKET");
        return s == null || s.isEmpty() ? "/tmp/unet.sock" : s;
    }

    static synchronized MemorySegment session() throws ViException {
        if (session != null) {
            return session;
        }
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(ADDRESS);
            // NULL: the library resolves UNET_SOCKET, one convention for
            // every client.
            int r = (int) Native.SESSION_CONNECT.invokeExact(MemorySegment.NULL, out);
            if (r != 0) {
                throw Native.failure("reaching the engine at " + socket()
                        + " (start one with `unet daemon`, or set UNET_SOCKET)", r);
            }
            session = out.get(ADDRESS, 0);
            return session;
        } catch (ViException e) {
            throw e;
        } catch (Throwable t) {
            throw Native.fatal(t);
        }
    }
}
