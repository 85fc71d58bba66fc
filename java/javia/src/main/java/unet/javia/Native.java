package unet.javia;

import java.lang.foreign.AddressLayout;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * The C ABI of unet ({@code include/unet.h}) as downcalls. The library is
 * found through the system property {@code unet.library}, the environment
 * variable {@code UNET_LIBRARY} (a path to {@code libunet.so}), or the
 * directories of {@code java.library.path}; a clear error names every
 * place looked at when none has it.
 */
final class Native {
    private Native() {}

    static final AddressLayout PTR = ADDRESS;

    /** {@code unet_vi_attrs}: 40 bytes. */
    static final StructLayout VI_ATTRS = MemoryLayout.structLayout(
            JAVA_INT.withName("reliability"),
            JAVA_INT.withName("strict_rnr"),
            JAVA_INT.withName("send_queue"),
            JAVA_INT.withName("recv_queue"),
            JAVA_INT.withName("spin_us"),
            JAVA_INT.withName("break_timeout_ms"),
            ADDRESS.withName("send_cq"),
            ADDRESS.withName("recv_cq"));
    /** {@code unet_vi_seg}: 24 bytes. */
    static final StructLayout VI_SEG = MemoryLayout.structLayout(
            ADDRESS.withName("region"),
            JAVA_LONG.withName("offset"),
            JAVA_LONG.withName("len"));
    /** {@code unet_vi_completion}: 16 bytes. */
    static final StructLayout VI_COMPLETION = MemoryLayout.structLayout(
            JAVA_LONG.withName("id"),
            JAVA_INT.withName("status"),
            JAVA_INT.withName("len"));

    static final int UNET_EFULL = -1;
    static final int UNET_ETIMEDOUT = -6;
    static final int UNET_ENOTSUP = -14;
    static final int UNET_EREFUSED = -8;
    static final int UNET_EINUSE = -16;
    static final int UNET_ENOTPOSTED = -17;

    private static final Linker LINKER = Linker.nativeLinker();
    private static final SymbolLookup LIB = load();

    // Calls that return at once and never call back: no thread-state
    // transition around them (Linker.Option.critical).
    private static final Linker.Option FAST = Linker.Option.critical(false);
    // As FAST, and the call may be handed memory of the Java heap: the
    // garbage collector does not move it during the call.
    private static final Linker.Option HEAP = Linker.Option.critical(true);

    static final MethodHandle LAST_ERROR = handle("unet_last_error_message", FunctionDescriptor.of(ADDRESS));
    static final MethodHandle STATUS_NAME = handle("unet_status_name", FunctionDescriptor.of(ADDRESS, JAVA_INT));
    static final MethodHandle VI_ERROR_NAME = handle("unet_vi_error_name", FunctionDescriptor.of(ADDRESS, JAVA_INT));
    static final MethodHandle SESSION_CONNECT =
            handle("unet_session_connect", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
    static final MethodHandle SESSION_CLOSE = handle("unet_session_close", FunctionDescriptor.ofVoid(ADDRESS));
    static final MethodHandle REGISTER_MEMORY =
            handle("unet_register_memory", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, ADDRESS));
    static final MethodHandle REGION_PTR = handle("unet_region_ptr", FunctionDescriptor.of(ADDRESS, ADDRESS));
    static final MethodHandle REGION_DEREGISTER =
            handle("unet_region_deregister", FunctionDescriptor.of(JAVA_INT, ADDRESS));
    static final MethodHandle REGION_FREE = handle("unet_region_free", FunctionDescriptor.ofVoid(ADDRESS));
    static final MethodHandle ATTRS_INIT = handle("unet_vi_attrs_init", FunctionDescriptor.of(JAVA_INT, ADDRESS));
    static final MethodHandle CQ_CREATE = handle("unet_cq_create", FunctionDescriptor.of(JAVA_INT, ADDRESS));
    static final MethodHandle CQ_FREE = handle("unet_cq_free", FunctionDescriptor.ofVoid(ADDRESS));
    static final MethodHandle CQ_WAIT = handle("unet_cq_wait",
            FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, ADDRESS, ADDRESS));
    static final MethodHandle LISTEN =
            handle("unet_vi_listen", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, ADDRESS));
    static final MethodHandle SERVER_FREE = handle("unet_vi_server_free", FunctionDescriptor.ofVoid(ADDRESS));
    static final MethodHandle ACCEPT = handle("unet_vi_server_accept",
            FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, JAVA_LONG, ADDRESS));
    static final MethodHandle CONNECT = handle("unet_vi_connect",
            FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, JAVA_LONG, ADDRESS, JAVA_LONG, ADDRESS));
    // The data path's calls take their pointers as plain addresses (a
    // pointer is a 64-bit integer in the C calling convention): a segment
    // argument would make each call acquire and release its arena's
    // session, two atomic operations. Vi keeps the memory alive until it
    // is closed, under its lock.
    static final MethodHandle POST_SEND = handle("unet_vi_post_send",
            FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG), FAST);
    static final MethodHandle SEND_COPIED = handle("unet_vi_send_copied",
            FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG, ADDRESS, JAVA_LONG), HEAP);
    static final MethodHandle POST_RECV = handle("unet_vi_post_recv",
            FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG), FAST);
    static final MethodHandle SEND_DONE =
            handle("unet_vi_send_done", FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG), FAST);
    static final MethodHandle RECV_DONE =
            handle("unet_vi_recv_done", FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG), FAST);
    static final MethodHandle SEND_WAIT =
            handle("unet_vi_send_wait", FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_LONG));
    static final MethodHandle RECV_WAIT =
            handle("unet_vi_recv_wait", FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_LONG));
    // A local VI's path lent to Javia (DirectPath).
    static final MethodHandle DIRECT_LEND =
            handle("unet_vi_direct_lend", FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG), FAST);
    static final MethodHandle DIRECT_RETURN =
            handle("unet_vi_direct_return", FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG), FAST);
    static final MethodHandle DIRECT_SLEEP =
            handle("unet_vi_direct_sleep", FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_LONG));
    // These two may ask the engine (once per region): not critical.
    static final MethodHandle DIRECT_GRANT =
            handle("unet_vi_direct_grant", FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG));
    static final MethodHandle DIRECT_PEER_REGION = handle("unet_vi_direct_peer_region",
            FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_LONG));
    static final MethodHandle REGION_HANDLE = handle("unet_region_handle", FunctionDescriptor.of(JAVA_LONG, ADDRESS));
    static final MethodHandle DIRECT_WAKE =
            handle("unet_vi_direct_wake", FunctionDescriptor.of(JAVA_INT, JAVA_LONG), FAST);
    static final MethodHandle VI_STATE = handle("unet_vi_state", FunctionDescriptor.of(JAVA_INT, ADDRESS));
    static final MethodHandle VI_ID = handle("unet_vi_id", FunctionDescriptor.of(JAVA_LONG, ADDRESS));
    static final MethodHandle VI_IS_DIRECT = handle("unet_vi_is_direct", FunctionDescriptor.of(JAVA_INT, ADDRESS));
    static final MethodHandle VI_CLOSE = handle("unet_vi_close", FunctionDescriptor.of(JAVA_INT, ADDRESS));

    // Restricted: loading native code. Sound: the library is unet's own, its
    // symbols are bound below with the signatures of include/unet.h.
    @SuppressWarnings("restricted")
    private static SymbolLookup load() {
        List<Path> tried = new ArrayList<>();
        String name = System.mapLibraryName("unet");
        for (String given : new String[] {System.getProperty("unet.library"), System.getenv("UNET_LIBRARY")}) {
            if (given != null && !given.isEmpty()) {
                Path p = Path.of(given);
                tried.add(p);
                if (Files.isRegularFile(p)) {
                    return SymbolLookup.libraryLookup(p, Arena.global());
                }
            }
        }
        String dirs = System.getProperty("java.library.path", "");
        for (String d : dirs.split(java.io.File.pathSeparator)) {
            if (d.isEmpty()) {
                continue;
            }
            Path p = Path.of(d, name);
            tried.add(p);
            if (Files.isRegularFile(p)) {
                return SymbolLookup.libraryLookup(p, Arena.global());
            }
        }
        throw new UnsatisfiedLinkError("Javia: no " + name + " found (set -Dunet.library=PATH or UNET_LIBRARY;"
                + " build it with `cargo build -p unet`); looked at " + tried);
    }

    // Restricted: a downcall. Sound: each descriptor above is the C
    // signature in include/unet.h (the tests check the struct layouts).
    @SuppressWarnings("restricted")
    private static MethodHandle handle(String name, FunctionDescriptor fd, Linker.Option... opts) {
        MemorySegment sym = LIB.find(name)
                .orElseThrow(() -> new UnsatisfiedLinkError("Javia: libunet has no " + name + " (an older build?)"));
        return LINKER.downcallHandle(sym, fd, opts);
    }

    /** A NUL-terminated C string at {@code p}, or "" for NULL. */
    // Restricted: a segment of unknown length. Sound: the library returns
    // NUL-terminated static or thread-local strings, read up to the NUL.
    @SuppressWarnings("restricted")
    static String cString(MemorySegment p) {
        if (p.equals(MemorySegment.NULL)) {
            return "";
        }
        return p.reinterpret(Long.MAX_VALUE).getString(0);
    }

    /** The calling thread's last failure, as the library describes it. */
    static String lastError() {
        try {
            return cString((MemorySegment) LAST_ERROR.invokeExact());
        } catch (Throwable t) {
            throw fatal(t);
        }
    }

    /** The C ABI's name of a VI error code ({@code UNET_VI_PEER_GONE}, ...). */
    static String viErrorName(int code) {
        try {
            return cString((MemorySegment) VI_ERROR_NAME.invokeExact(code));
        } catch (Throwable t) {
            throw fatal(t);
        }
    }

    /** The C ABI's name of a status ({@code UNET_ETIMEDOUT}, ...). */
    static String statusName(int status) {
        try {
            return cString((MemorySegment) STATUS_NAME.invokeExact(status));
        } catch (Throwable t) {
            throw fatal(t);
        }
    }

    /** A failed call: {@code what}, the status's name and the library's words. */
    static ViException failure(String what, int status) {
        String msg = lastError();
        return new ViException(what + " failed: " + statusName(status) + (msg.isEmpty() ? "" : " (" + msg + ")"));
    }

    /** A downcall threw: only a bug of the bindings can do that. */
    static Error fatal(Throwable t) {
        if (t instanceof Error e) {
            return e;
        }
        return new AssertionError("Javia: a downcall failed unexpectedly", t);
    }

    /** A NUL-terminated copy of {@code s} in {@code arena}. */
    static MemorySegment str(Arena arena, String s) {
        return arena.allocateFrom(s);
    }

    static final ValueLayout.OfLong LONG = JAVA_LONG;
}
