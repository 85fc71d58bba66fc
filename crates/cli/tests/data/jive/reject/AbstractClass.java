// An abstract method has no code to run.
// reject: abstract
public abstract class AbstractClass {
    abstract int f(int x);
    static int g() { return 1; }
}
