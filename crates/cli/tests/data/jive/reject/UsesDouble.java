// reject: double
public class UsesDouble {
    static int root(int x) { double d = x; return (int) (d * 0.5); }
}
