// reject: superclass
public class Extends extends Thread {
    static int get() { return 1; }
}
