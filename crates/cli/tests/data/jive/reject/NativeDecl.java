// A native method of the applet itself, not of unet.sle.Natives.
// reject: native
public class NativeDecl {
    static native int peek(int addr);
    static int get() { return 0; }
}
