package unet.sle;

// Compile-time stand-in for the SDK's Natives with one method that no
// native domain provides, so that applets calling it can be compiled.
public final class Natives {
    private Natives() {
    }

    public static int missing() {
        return 0;
    }
}
