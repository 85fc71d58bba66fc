// reject: method check(I)I at offset
// reject: athrow
public class Throws {
    static int check(int x) {
        if (x < 0) {
            throw null;
        }
        return x;
    }
}
