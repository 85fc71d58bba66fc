// A method of unet.sle.Natives that no domain provides.
// reject: missing
import unet.sle.Natives;

public class UnknownNative {
    static int call() { return Natives.missing(); }
}
