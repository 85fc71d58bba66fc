// Throwing needs an exception object, which cannot be made.
// reject: new is not supported
public class ThrowsNew {
    static int check(int x) {
        if (x < 0) throw new IllegalArgumentException();
        return x;
    }
}
