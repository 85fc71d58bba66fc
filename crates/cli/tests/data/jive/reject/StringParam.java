// reject: java/lang/String
public class StringParam {
    static int len(String s) { return 0; }
}
