package unet.javia;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/** Finding the VarHandle of a field in a class's static initialiser. */
final class VarHandles {
    private VarHandles() {}

    /**
     * The handle of field {@code name} of type {@code type} in the class
     * that {@code lookup} looks up from (pass {@code MethodHandles.lookup()}:
     * the field may be private).
     */
    static VarHandle field(MethodHandles.Lookup lookup, String name, Class<?> type) {
        try {
            return lookup.findVarHandle(lookup.lookupClass(), name, type);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }
}
