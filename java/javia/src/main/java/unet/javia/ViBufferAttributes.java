package unet.javia;

/**
 * How a {@link ViBuffer} is registered with a VI. The paper names VIA's
 * memory attributes here (read-only, RDMA enable); unet's VIA has no RDMA,
 * and every registered buffer may be sent from and received into, so
 * {@code new ViBufferAttributes()} is all there is to say today.
 */
public final class ViBufferAttributes {
    /** The defaults. */
    public ViBufferAttributes() {}
}
