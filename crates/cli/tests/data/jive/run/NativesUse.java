// The natives of the test domain (unet.sle.Natives): nop, id, sum, fill; and
// faults raised inside a native.
//
// expect: callNop 3 => 3
// expect: callId -17 => -17
// expect: sumRange 1 3 => 5
// expect: sumAll => -6
// expect: fillThenSum 300 4 => 176
// expect: fillPart 5 2 => 10
// expect: sumOutOfRange 4 3 => fault
// expect: sumNull => fault
import unet.sle.Natives;

public class NativesUse {
    static byte[] data = {1, -2, 3, 4, -12};

    static int callNop(int n) {
        for (int i = 0; i < n; i++) Natives.nop();
        return n;
    }

    static int callId(int x) { return Natives.id(x); }

    static int sumRange(int off, int len) { return Natives.sum(data, off, len); }

    static int sumAll() { return Natives.sum(data, 0, data.length); }

    // fill narrows v to a byte: 300 is (byte) 44
    static int fillThenSum(int v, int len) {
        byte[] b = new byte[len];
        Natives.fill(b, v, len);
        return Natives.sum(b, 0, len);
    }

    // fills the first len of 4 bytes, sums all 4
    static int fillPart(int v, int len) {
        byte[] b = new byte[4];
        Natives.fill(b, v, len);
        return Natives.sum(b, 0, 4);
    }

    static int sumOutOfRange(int off, int len) { return Natives.sum(data, off, len); }

    static int sumNull() {
        byte[] none = null;
        return Natives.sum(none, 0, 1);
    }
}
