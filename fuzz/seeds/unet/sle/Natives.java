package unet.sle;

/** Declarations of the natives `fuzz_targets/jive_jit.rs` registers, for compiling the seeds. */
public final class Natives {
    private Natives() {}

    public static native void nop();

    public static native int id(int x);

    public static native int sum(byte[] a, int off, int len);

    public static native void fill(byte[] a, int v, int len);

    /** Copy {@code len} bytes from the host's window at {@code woff} into {@code a[aoff..]}. */
    public static native void wget(byte[] a, int aoff, int woff, int len);

    /** Copy {@code a[aoff..aoff + len]} into the host's window at {@code woff}. */
    public static native void wput(byte[] a, int aoff, int woff, int len);

    /** Hand {@code a[aoff..aoff + len]} to the host with {@code x}. */
    public static native void emit(byte[] a, int aoff, int x, int len);
}
