package unet.sle;

/**
 * The native methods a JIVE applet may call.
 *
 * <p>A JIVE applet is a single Java class running on the network interface.
 * Besides its own methods it may only call static methods of this class, and
 * only those of the domains the host granted when it loaded the applet (for
 * example {@code unet applet run} grants the {@code test} domain). JIVE
 * replaces each method by its own native implementation; the bodies here are
 * plain-Java reference implementations with the same behaviour, so that an
 * applet can also be compiled against this class and run on a standard JVM,
 * for example to compare results or timings.
 *
 * <p>An error in a native (an array index out of range, a {@code null}
 * array) is a fault that stops the applet's call in JIVE; here it is the
 * corresponding Java exception.
 *
 * <h2>Domain {@code test}</h2>
 * {@link #nop()}, {@link #id(int)}, {@link #sum(byte[], int, int)} and
 * {@link #fill(byte[], int, int)}: natives without effect outside the applet,
 * for tests and benchmarks.
 */
public final class Natives {
    private Natives() {
    }

    /**
     * Does nothing. Domain {@code test}; the null native call of the
     * benchmarks.
     */
    public static void nop() {
    }

    /**
     * Returns its argument.
     *
     * @param x any value
     * @return {@code x}
     */
    public static int id(int x) {
        return x;
    }

    /**
     * Adds up {@code len} bytes of {@code a} from index {@code off}, each
     * byte taken as signed ({@code -128..127}), with int wrap-around.
     *
     * @param a   the array
     * @param off index of the first byte
     * @param len number of bytes; {@code 0} returns {@code 0}
     * @return {@code a[off] + ... + a[off + len - 1]}
     * @throws NullPointerException           if {@code a} is {@code null}
     * @throws ArrayIndexOutOfBoundsException if {@code off} or {@code len}
     *                                        is negative or
     *                                        {@code off + len > a.length}
     */
    public static int sum(byte[] a, int off, int len) {
        checkRange(a, off, len);
        int s = 0;
        for (int i = off; i < off + len; i++) {
            s += a[i];
        }
        return s;
    }

    /**
     * Sets the first {@code len} bytes of {@code a} to {@code (byte) v}.
     *
     * @param a   the array
     * @param v   the value, narrowed to a byte as by a {@code (byte)} cast
     * @param len number of bytes from index {@code 0}
     * @throws NullPointerException           if {@code a} is {@code null}
     * @throws ArrayIndexOutOfBoundsException if {@code len} is negative or
     *                                        greater than {@code a.length}
     */
    public static void fill(byte[] a, int v, int len) {
        checkRange(a, 0, len);
        for (int i = 0; i < len; i++) {
            a[i] = (byte) v;
        }
    }

    private static void checkRange(byte[] a, int off, int len) {
        if (a == null) {
            throw new NullPointerException();
        }
        if (off < 0 || len < 0 || off > a.length - len) {
            throw new ArrayIndexOutOfBoundsException(
                    "range [" + off + ", " + off + " + " + len + ") of length " + a.length);
        }
    }
}
