// reject: newarray of long
public class UsesLongArray {
    static int make(int n) { return new long[n].length; }
}
