package unet.javia;

/**
 * A machine, as the paper names it: {@code "local"} for this host's engine,
 * or another engine's UDP wire as {@code "HOST:PORT"}. Java programs reach
 * their own engine as every unet client does: the control socket named by
 * the environment variable {@code UNET_SOCKET} ({@code /tmp/unet.sock} when
 * it is not set), where {@code unet daemon} listens.
 */
public final class ViAddress {
    /** This host's engine. */
    public static final ViAddress LOCAL = new ViAddress("local");

    private final String host;

    /**
     * The machine {@code address} names.
     *
     * @param address {@code "local"} or {@code "HOST:PORT"}
     * @throws IllegalArgumentException when it is neither
     */
    public ViAddress(String address) {
        if (address == null || address.isEmpty()) {
            throw new IllegalArgumentException("a ViAddress is \"local\" or an engine's HOST:PORT, not empty");
        }
        if (!address.equals("local")) {
            int colon = address.lastIndexOf(':');
            if (colon <= 0 || colon == address.length() - 1) {
                throw new IllegalArgumentException(
                        "a ViAddress is \"local\" or an engine's HOST:PORT: \"" + address + "\" has no port");
            }
            try {
                int port = Integer.parseInt(address.substring(colon + 1));
                if (port <= 0 || port > 65535) {
                    throw new IllegalArgumentException("port " + port + " of \"" + address + "\" is out of range");
                }
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException("the port of \"" + address + "\" is not a number", e);
            }
        }
        this.host = address;
    }

    /** @return whether this is this host's engine */
    public boolean isLocal() {
        return host.equals("local");
    }

    @Override
    public String toString() {
        return host;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof ViAddress a && a.host.equals(host);
    }

    @Override
    public int hashCode() {
        return host.hashCode();
    }
}
