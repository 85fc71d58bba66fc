// The instance: the applet object made by the no-argument constructor, its
// fields (set in the constructor or by initializers) and instance methods.
//
// expect: getBase => 7
// expect: addToBase 5 => 12
// expect: accumulate 4 => 39
// expect: fieldArray 3 => 6
// expect: callsStatic 2 => 18
// expect: flagged => 1
public class Instance {
    int base;
    int total = 30;
    int[] slots = new int[8];
    short small = 9;
    byte tiny = -1;
    boolean flag;

    public Instance() {
        base = 7;
        flag = true;
    }

    int getBase() { return base; }

    int addToBase(int x) { return base + x; }

    // adds i into total for i in 0..n, then returns total + tiny + ...
    int accumulate(int n) {
        for (int i = 0; i < n; i++) total += i;
        return total + tiny + small - 5;
    }

    int fieldArray(int i) {
        slots[i] = i * 2;
        return this.slots[i];
    }

    static int twice(int x) { return 2 * x; }

    int callsStatic(int x) { return twice(x) + addToBase(x) + getBase() - 2; }

    int flagged() { return flag ? 1 : 0; }
}
