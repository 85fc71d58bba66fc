package unet.javia;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * The engine the tests talk to: a {@code unet daemon} started once per test
 * JVM on the socket named by {@code UNET_SOCKET} (set by the build), and
 * stopped when the JVM exits. Also starts peer JVMs that run a class of
 * this module with the same environment.
 */
final class TestEngine {
    private TestEngine() {}

    private static Process daemon;

    static synchronized void ensure() throws IOException, InterruptedException {
        if (daemon != null && daemon.isAlive()) {
            return;
        }
        String bin = System.getProperty("unet.bin");
        if (bin == null || !Files.isExecutable(Path.of(bin))) {
            throw new IllegalStateException("the tests need the unet binary: -Dunet.bin=" + bin
                    + " is not executable (build it with cargo build --profile ci)");
        }
        String socket = Engine.socket();
        Files.deleteIfExists(Path.of(socket));
        ProcessBuilder pb = new ProcessBuilder(bin, "daemon", "--socket", socket);
        pb.redirectErrorStream(true);
        daemon = pb.start();
        BufferedReader r = new BufferedReader(new InputStreamReader(daemon.getInputStream(), StandardCharsets.UTF_8));
        String line = r.readLine();
        if (line == null || !line.startsWith("unet daemon: control socket")) {
            throw new IllegalStateException("unet daemon did not start: " + line);
        }
        Thread drain = new Thread(() -> {
            try {
                while (r.readLine() != null) {
                    // The daemon's further lines are not needed.
                }
            } catch (IOException e) {
                // The daemon went.
            }
        });
        drain.setDaemon(true);
        drain.start();
        Process d = daemon;
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            d.destroy();
            try {
                d.waitFor(5, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }));
    }

    /** A JVM running {@code main} of {@code cls} with {@code args}, its output piped. */
    static Process jvm(Class<?> cls, String... args) throws IOException {
        List<String> cmd = new ArrayList<>();
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        cmd.add("--enable-native-access=ALL-UNNAMED");
        cmd.add("-Dunet.library=" + System.getProperty("unet.library"));
        cmd.add("-cp");
        cmd.add(System.getProperty("java.class.path"));
        cmd.add(cls.getName());
        cmd.addAll(List.of(args));
        ProcessBuilder pb = new ProcessBuilder(cmd);
        pb.redirectError(ProcessBuilder.Redirect.INHERIT);
        return pb.start();
    }

    /** The next line of {@code p}'s output (null at its end). */
    static String line(Process p) throws IOException {
        StringBuilder sb = new StringBuilder();
        int c;
        while ((c = p.getInputStream().read()) >= 0 && c != '\n') {
            sb.append((char) c);
        }
        return c < 0 && sb.length() == 0 ? null : sb.toString();
    }
}
