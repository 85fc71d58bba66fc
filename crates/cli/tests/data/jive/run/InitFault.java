// A fault in the static initializer stops the run before the call.
//
// expect: get => fault zero
public class InitFault {
    static int zero = 0;
    static int bad = 10 / zero;

    static int get() { return bad; }
}
