// reject: System
public class SystemOut {
    static void hello() { System.out.println(1); }
}
