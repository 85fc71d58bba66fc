// reject: char
public class UsesChar {
    static int letter(int x) { char c = (char) x; return c + 1; }
}
