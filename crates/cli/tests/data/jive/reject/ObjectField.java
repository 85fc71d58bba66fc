// reject: Object
public class ObjectField {
    static Object thing;
    static int get() { return 0; }
}
