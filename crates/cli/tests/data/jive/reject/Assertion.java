// `assert` needs an AssertionError object (and java/lang/Class in <clinit>).
// reject: method positive(I)I at offset
// reject: new is not supported
public class Assertion {
    static int positive(int x) {
        assert x > 0;
        return x;
    }
}
