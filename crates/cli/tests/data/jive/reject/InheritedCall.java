// A method the class only inherits from Object.
// reject: hashCode
public class InheritedCall {
    int h() { return hashCode(); }
}
