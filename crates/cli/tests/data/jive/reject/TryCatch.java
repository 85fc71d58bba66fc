// reject: exception
public class TryCatch {
    static int safe(int a, int b) {
        try {
            return a / b;
        } catch (ArithmeticException e) {
            return 0;
        }
    }
}
