// reject: synchronized
public class SynchronizedMethod {
    static synchronized int inc(int x) { return x + 1; }
}
