// reject: athrow
public class Throws {
    static int check(int x) {
        if (x < 0) throw new IllegalArgumentException();
        return x;
    }
}
