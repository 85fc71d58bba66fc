// Static initializers: field initial values, a static block with a loop, and
// arrays built at class initialization; static state persists across calls
// within one run.
//
// expect: get => 42
// expect: tableAt 5 => 25
// expect: tableAt 9 => 81
// expect: tableLen => 10
// expect: counterTwice => 3
// expect: bytesSum => -6
// expect: untouched => 0
public class StaticInit {
    static int answer = 6 * 7;
    static int[] squares;
    static byte[] bytes = {1, -2, 3, -4, 5, -9};
    static int counter;
    static int zero;
    static short s = -3;

    static {
        squares = new int[10];
        for (int i = 0; i < squares.length; i++) {
            squares[i] = i * i;
        }
        counter = 1;
    }

    static int get() { return answer; }
    static int tableAt(int i) { return squares[i]; }
    static int tableLen() { return squares.length; }

    static int bump() { return ++counter; }
    static int counterTwice() { bump(); return bump(); }

    static int bytesSum() {
        int t = 0;
        for (int i = 0; i < bytes.length; i++) t += bytes[i];
        return t + s + 3;
    }

    static int untouched() { return zero; }
}
