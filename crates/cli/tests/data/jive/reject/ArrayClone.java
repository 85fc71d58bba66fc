// reject: clone
public class ArrayClone {
    static int copy(int n) {
        int[] a = new int[n];
        int[] b = a.clone();
        return b.length;
    }
}
