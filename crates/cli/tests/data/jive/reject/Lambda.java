// reject: invokedynamic
public class Lambda {
    static int apply(int x) {
        java.util.function.IntUnaryOperator f = v -> v + 1;
        return f.applyAsInt(x);
    }
}
