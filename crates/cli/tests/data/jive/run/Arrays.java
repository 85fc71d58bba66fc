// Arrays of every element type: boolean (baload/bastore), byte, short, int;
// lengths, default values, and arrays passed between methods.
//
// expect: bools 10 => 4
// expect: boolDefault => 0
// expect: shorts 3 => -32768
// expect: shortWrap => 32767
// expect: bytesDefault 5 => 0
// expect: intsSum 100 => 4950
// expect: length 0 => 0
// expect: length 17 => 17
// expect: copy 6 => 15
public class Arrays {
    // counts the i < n with i % 3 == 0, stored in a boolean[]
    static int bools(int n) {
        boolean[] b = new boolean[n];
        for (int i = 0; i < n; i++) b[i] = i % 3 == 0;
        int c = 0;
        for (int i = 0; i < n; i++) if (b[i]) c++;
        return c;
    }

    static int boolDefault() {
        boolean[] b = new boolean[2];
        return b[1] ? 1 : 0;
    }

    static int shorts(int i) {
        short[] s = new short[4];
        s[i] = (short) 32767;
        s[i]++;
        return s[i];
    }

    static int shortWrap() {
        short[] s = {-32768};
        s[0]--;
        return s[0];
    }

    static int bytesDefault(int n) {
        byte[] b = new byte[n];
        int t = 0;
        for (int i = 0; i < n; i++) t |= b[i];
        return t;
    }

    static int intsSum(int n) {
        int[] a = new int[n];
        for (int i = 0; i < n; i++) a[i] = i;
        return sum(a);
    }

    static int sum(int[] a) {
        int t = 0;
        for (int i = 0; i < a.length; i++) t += a[i];
        return t;
    }

    static int length(int n) { return new short[n].length; }

    static int copy(int n) {
        int[] a = new int[n];
        for (int i = 0; i < n; i++) a[i] = i;
        int[] b = new int[n];
        for (int i = 0; i < n; i++) b[n - 1 - i] = a[i];
        return sum(b);
    }
}
