// reject: long
public class UsesLong {
    static int widen(int x) { long y = x; return (int) (y * y); }
}
