// Object types are refused in the signature, before any invokeinterface.
// reject: java/util/List
public class Interface {
    static int size(java.util.List<Integer> l) { return l.size(); }
}
