// reject: field big J
public class LongField {
    static long big;
    static int get() { return 0; }
}
