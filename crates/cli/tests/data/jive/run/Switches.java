// Both switch forms: dense cases compile to tableswitch, sparse ones to
// lookupswitch; defaults, fall-through and negative keys.
//
// expect: dense -1 => 99
// expect: dense 0 => 10
// expect: dense 1 => 11
// expect: dense 2 => 23
// expect: dense 3 => 13
// expect: dense 4 => 14
// expect: dense 5 => 99
// expect: dense -2147483648 => 99
// expect: dense 2147483647 => 99
// expect: sparse -1000000 => 1
// expect: sparse -5 => 2
// expect: sparse 7 => 3
// expect: sparse 1000 => 4
// expect: sparse 2147483647 => 5
// expect: sparse 8 => 0
// expect: sparse -2147483648 => 0
// expect: negativeTable -3 => 3
// expect: negativeTable -1 => 1
// expect: negativeTable 0 => -1
// expect: sumAll => 569
public class Switches {
    static int dense(int k) {
        int r;
        switch (k) {
            case 0: r = 10; break;
            case 1: r = 11; break;
            case 2: r = 12; // fall through
            case 3: r = (k == 2) ? 23 : 13; break;
            case 4: r = 14; break;
            default: r = 99;
        }
        return r;
    }

    static int sparse(int k) {
        switch (k) {
            case -1000000: return 1;
            case -5: return 2;
            case 7: return 3;
            case 1000: return 4;
            case 2147483647: return 5;
            default: return 0;
        }
    }

    static int negativeTable(int k) {
        switch (k) {
            case -3: return 3;
            case -2: return 2;
            case -1: return 1;
            default: return -1;
        }
    }

    static int sumAll() {
        int s = 0;
        for (int i = -2; i < 8; i++) {
            s += dense(i) + sparse(i);
        }
        return s;
    }
}
