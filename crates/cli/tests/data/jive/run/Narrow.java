// Methods with byte, short and boolean parameters and results. The command
// line passes ints, which must fit the parameter's type (booleans are 0 or
// 1; `unet applet run` refuses others as a usage error); boolean results
// print as 1 or 0.
//
// expect: byteParam -56 => -56
// expect: byteParam -1 => -1
// expect: shortParam -25536 => -25536
// expect: boolParam 1 => 7
// expect: boolParam 0 => 3
// expect: byteParam 127 => 127
// expect: isNegative -5 => 1
// expect: isNegative 5 => 0
// expect: byteResult 300 => 44
// expect: shortResult 70000 => 4464
// expect: mixed 1 2 3 1 => 7
public class Narrow {
    static int byteParam(byte b) { return b; }
    static int shortParam(short s) { return s; }
    static int boolParam(boolean z) { return z ? 7 : 3; }
    static boolean isNegative(int x) { return x < 0; }
    static byte byteResult(int x) { return (byte) x; }
    static short shortResult(int x) { return (short) x; }
    static int mixed(byte a, short b, int c, boolean d) { return a + b + c + (d ? 1 : 0); }
}
