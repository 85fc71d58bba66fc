package unet.javia;

import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * The other end of a test: a body run on a thread of its own. Not on the
 * common fork-join pool, whose single worker on a two-core machine would
 * make one test's peer wait behind another's. When the test's own side
 * fails, {@link #failed} reports the peer's state beside it: a peer that
 * threw stops sending, and the receiver then times out, which alone would
 * hide the cause.
 *
 * @param <T> what the body returns
 */
final class Peer<T> {
    private final CompletableFuture<T> result = new CompletableFuture<>();
    private final Thread thread;

    private Peer(String name, Callable<T> body) {
        thread = new Thread(() -> {
            try {
                result.complete(body.call());
            } catch (Throwable e) {
                result.completeExceptionally(e);
            }
        }, name);
        thread.setDaemon(true);
    }

    /** Start {@code body} on a new daemon thread named {@code name}. */
    static <T> Peer<T> start(String name, Callable<T> body) {
        Peer<T> p = new Peer<>(name, body);
        p.thread.start();
        return p;
    }

    /** Start {@code body}, which returns nothing. */
    static Peer<Void> run(String name, Body body) {
        return start(name, () -> {
            body.run();
            return null;
        });
    }

    /** A body that may throw and returns nothing. */
    @FunctionalInterface
    interface Body {
        void run() throws Exception;
    }

    /** The body's result, waiting at most {@code seconds}; its failure rethrown. */
    T get(long seconds) throws Exception {
        try {
            return result.get(seconds, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            if (e.getCause() instanceof Exception x) {
                throw x;
            }
            throw e;
        } catch (TimeoutException e) {
            throw new AssertionError(thread.getName() + " did not finish within " + seconds + " s; it is at:"
                    + stack(), e);
        }
    }

    /**
     * {@code mine}, the failure of the test's own side, with the peer's
     * state: its failure as the cause if it failed, else where it is now.
     */
    AssertionError failed(Throwable mine) {
        Throwable theirs = null;
        try {
            result.get(1, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            theirs = e.getCause();
        } catch (TimeoutException | InterruptedException e) {
            // Still running: its stack says where.
        }
        String state = theirs != null ? "it failed: " + theirs
                : result.isDone() ? "it had finished" : "it is still running, at:" + stack();
        AssertionError a = new AssertionError(mine + " (" + thread.getName() + ": " + state + ")", mine);
        if (theirs != null) {
            a.addSuppressed(theirs);
        }
        return a;
    }

    private String stack() {
        StringBuilder sb = new StringBuilder();
        for (StackTraceElement e : thread.getStackTrace()) {
            sb.append("\n    at ").append(e);
        }
        return sb.toString();
    }
}
