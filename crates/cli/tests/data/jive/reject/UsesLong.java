// reject: method widen(I)I at offset 1
// reject: long
public class UsesLong {
    static int widen(int x) { long y = x; return (int) (y * y); }
}
