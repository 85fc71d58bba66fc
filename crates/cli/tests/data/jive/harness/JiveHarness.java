import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.lang.reflect.Constructor;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.charset.StandardCharsets;

/**
 * Runs applet methods on the JVM the way {@code unet applet run} runs them
 * on JIVE, for comparing results.
 *
 * <p>Reads commands from standard input, one a line:
 * {@code CLASSDIR CLASSNAME METHOD [INT...]}. For each it loads the class in a
 * fresh class loader (so static state starts anew), runs its static
 * initializer, makes the instance with the no-argument constructor, calls the
 * method (static or instance, found by name) with the int arguments narrowed
 * to the parameter types, and prints one line: the int result, {@code void},
 * or {@code fault: EXCEPTION}.
 */
public final class JiveHarness {
    private JiveHarness() {
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            line = line.trim();
            if (line.isEmpty()) {
                continue;
            }
            System.out.println(runOne(line.split("\\s+")));
            System.out.flush();
        }
    }

    private static String runOne(String[] w) throws Exception {
        URL dir = new File(w[0]).toURI().toURL();
        try (URLClassLoader loader = new URLClassLoader(new URL[] {dir}, JiveHarness.class.getClassLoader())) {
            Class<?> c = Class.forName(w[1], false, loader);
            Method target = null;
            for (Method m : c.getDeclaredMethods()) {
                if (m.getName().equals(w[2])) {
                    target = m;
                }
            }
            if (target == null) {
                return "error: no method " + w[2];
            }
            Class<?>[] types = target.getParameterTypes();
            if (types.length != w.length - 3) {
                return "error: " + w[2] + " takes " + types.length + " arguments";
            }
            Object[] actual = new Object[types.length];
            for (int i = 0; i < types.length; i++) {
                int v = Integer.parseInt(w[3 + i]);
                if (types[i] == int.class) {
                    actual[i] = v;
                } else if (types[i] == short.class) {
                    actual[i] = (short) v;
                } else if (types[i] == byte.class) {
                    actual[i] = (byte) v;
                } else if (types[i] == boolean.class) {
                    actual[i] = (v & 1) != 0;
                } else {
                    return "error: parameter " + i + " is " + types[i];
                }
            }
            try {
                Class.forName(w[1], true, loader);
                Constructor<?> k = c.getDeclaredConstructor();
                k.setAccessible(true);
                Object self = k.newInstance();
                target.setAccessible(true);
                Object r = target.invoke(Modifier.isStatic(target.getModifiers()) ? null : self, actual);
                if (target.getReturnType() == void.class) {
                    return "void";
                }
                if (r instanceof Boolean) {
                    return ((Boolean) r) ? "1" : "0";
                }
                return String.valueOf(((Number) r).intValue());
            } catch (ExceptionInInitializerError e) {
                return "fault: " + e.getCause();
            } catch (InvocationTargetException e) {
                return "fault: " + e.getCause();
            } catch (StackOverflowError e) {
                return "fault: " + e;
            }
        }
    }
}
