// reject: method cells(I)I at offset
// reject: multianewarray
public class TwoDimArray {
    static int cells(int n) { int[][] a = new int[n][n]; return a.length; }
}
