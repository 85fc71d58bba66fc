// reject: monitor
public class Synchronized {
    static int[] lock = new int[1];
    static int inc(int x) {
        synchronized (lock) {
            return x + 1;
        }
    }
}
