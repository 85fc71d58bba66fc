// reject: overload
public class Overloading {
    static int f(int x) { return x; }
    static int f(int x, int y) { return x + y; }
}
