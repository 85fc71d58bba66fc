// reject: float
public class UsesFloat {
    static int half(int x) { float f = x; return (int) (f / 2); }
}
