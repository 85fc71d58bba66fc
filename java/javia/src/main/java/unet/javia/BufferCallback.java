package unet.javia;

/**
 * Told when a freed {@link ViBuffer} has been released: no view of it was
 * reachable any more, and its memory went back to the engine.
 */
@FunctionalInterface
public interface BufferCallback {
    /**
     * The buffer is released.
     *
     * @param size its size in bytes
     */
    void released(int size);
}
