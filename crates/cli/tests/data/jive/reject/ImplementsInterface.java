// reject: interface
public class ImplementsInterface implements Runnable {
    public void run() { }
}
