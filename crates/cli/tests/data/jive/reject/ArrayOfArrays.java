// reject: anewarray
public class ArrayOfArrays {
    static int rows(int n) { int[][] a = new int[n][]; return a.length; }
}
