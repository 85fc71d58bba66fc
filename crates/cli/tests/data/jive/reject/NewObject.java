// reject: new
public class NewObject {
    static int make() { return new NewObject().hashCode(); }
}
