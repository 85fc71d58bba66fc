// javac guards the monitor with an exception handler, refused first.
// reject: exception handler
public class Synchronized {
    static int[] lock = new int[1];
    static int inc(int x) {
        synchronized (lock) {
            return x + 1;
        }
    }
}
