// reject: char
public class CharArray {
    static int first(int n) { char[] c = new char[n]; return c.length; }
}
