// reject: invokeinterface
public class Interface {
    static int size(java.util.List<Integer> l) { return l.size(); }
}
