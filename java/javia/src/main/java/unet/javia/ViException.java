package unet.javia;

import java.io.IOException;

/**
 * A VIA operation failed: the message names the cause (a VI in the error
 * state and why, a closed VI, a bad offset or length, a buffer still in use,
 * no engine, no native library). Nothing in Javia fails silently: every
 * failure is one of these.
 */
public class ViException extends IOException {
    private static final long serialVersionUID = 1L;

    /** The VIA error of a broken VI ({@code "UNET_VI_PEER_GONE"} ...), or null. */
    private final String viError;

    /** A failure described by {@code message}. */
    public ViException(String message) {
        this(message, null);
    }

    ViException(String message, String viError) {
        super(message);
        this.viError = viError;
    }

    /**
     * The VI error that caused this, as the C ABI names it
     * ({@code UNET_VI_PEER_GONE}, {@code UNET_VI_TOO_LONG}, ...), or null
     * when the failure is not a VI's error state.
     *
     * @return the name, or null
     */
    public String viError() {
        return viError;
    }
}
