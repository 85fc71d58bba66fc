// reject: invokedynamic
public class StringConcat {
    static int len(int x) { return ("n=" + x).length(); }
}
