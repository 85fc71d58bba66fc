// Integer arithmetic at its edges: wrap-around, division and remainder signs,
// shift counts masked to 5 bits, narrowing conversions, sign extension.
//
// expect: add 2147483647 1 => -2147483648
// expect: sub -2147483648 1 => 2147483647
// expect: mul 65536 65536 => 0
// expect: mul 123456789 987654321 => -67153019
// expect: neg -2147483648 => -2147483648
// expect: div -2147483648 -1 => -2147483648
// expect: rem -2147483648 -1 => 0
// expect: div -7 2 => -3
// expect: div 7 -2 => -3
// expect: rem -7 2 => -1
// expect: rem 7 -2 => 1
// expect: rem -7 -2 => -1
// expect: shl 1 31 => -2147483648
// expect: shl 1 32 => 1
// expect: shl 1 33 => 2
// expect: shl 3 -1 => -2147483648
// expect: shr -8 1 => -4
// expect: shr -8 33 => -4
// expect: shr -1 31 => -1
// expect: ushr -8 1 => 2147483644
// expect: ushr -1 32 => -1
// expect: ushr -1 63 => 1
// expect: i2b 200 => -56
// expect: i2b 384 => -128
// expect: i2b 127 => 127
// expect: i2s 40000 => -25536
// expect: i2s 98303 => 32767
// expect: i2s 65535 => -1
// expect: bitops 12 10 => 1544
// expect: baload 200 => -56
// expect: baload 127 => 127
// expect: saload 40000 => -25536
// expect: byteArith 100 100 => -56
// expect: compare -1 1 => 0
// expect: compare 1 -1 => 1
// expect: compare -2147483648 2147483647 => 0
// expect: consts => 1014
public class IntEdge {
    static int add(int a, int b) { return a + b; }
    static int sub(int a, int b) { return a - b; }
    static int mul(int a, int b) { return a * b; }
    static int neg(int a) { return -a; }
    static int div(int a, int b) { return a / b; }
    static int rem(int a, int b) { return a % b; }
    static int shl(int a, int n) { return a << n; }
    static int shr(int a, int n) { return a >> n; }
    static int ushr(int a, int n) { return a >>> n; }
    static int i2b(int a) { return (byte) a; }
    static int i2s(int a) { return (short) a; }

    // (a & b) | ((a ^ b) << 8) | (~a & 0) ... a mix of the logical operators
    static int bitops(int a, int b) {
        return (a & b) | ((a ^ b) << 8) | (~a & 0) | ((a | b) >> 4 << 11 & 0);
    }

    static int baload(int v) {
        byte[] a = new byte[3];
        a[1] = (byte) v;
        return a[1];
    }

    static int saload(int v) {
        short[] a = new short[2];
        a[1] = (short) v;
        return a[1];
    }

    static int byteArith(int x, int y) {
        byte a = (byte) x;
        byte b = (byte) y;
        byte c = (byte) (a + b);
        return c;
    }

    // signed comparison, including the extremes: 1 when a > b, else 0
    static int compare(int a, int b) {
        if (a > b) {
            return 1;
        }
        return 0;
    }

    // iconst_m1..5, bipush, sipush and ldc constants
    static int consts() {
        int s = -1 + 0 + 1 + 2 + 3 + 4 + 5;
        s += 100;      // bipush
        s += -100;     // bipush
        s += 1000;     // sipush
        s += 100000;   // ldc
        s -= 100000;
        return s;
    }
}
