// Math is another class, not a native of a granted domain.
// reject: Math
public class NotGranted {
    static int abs(int x) { return Math.abs(x); }
}
