// reject: Helper
public class OtherClass {
    static int twice(int x) { return Helper.twice(x); }
}

class Helper {
    static int twice(int x) { return 2 * x; }
}
