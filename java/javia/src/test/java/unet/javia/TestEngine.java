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
    /** The UDP wire of this JVM's engine ("127.0.0.1:PORT"). */
    private static String wire;
    private static Daemon second;

    /** A daemon of the tests: its control socket and its UDP wire. */
    record Daemon(Process proc, String socket, String wire) {}

    /** This JVM's engine's UDP wire, "127.0.0.1:PORT". */
    static synchronized String wire() throws IOException, InterruptedException {
        ensure();
        return wire;
    }

    /** A second engine (its own daemon, socket and wire), for the tests over two engines. */
    static synchronized Daemon second() throws IOException {
        if (second == null || !second.proc().isAlive()) {
            String socket = Path.of(Engine.socket()).resolveSibling("javia-test-b.sock").toString();
            second = start(socket);
        }
        return second;
    }

    static synchronized void ensure() throws IOException, InterruptedException {
        if (daemon != null && daemon.isAlive()) {
            return;
        }
        Daemon d = start(Engine.socket());
        daemon = d.proc();
        wire = d.wire();
    }

    private static Daemon start(String socket) throws IOException {
        String bin = System.getProperty("unet.bin");
        if (bin == null || !Files.isExecutable(Path.of(bin))) {
            throw new IllegalStateException("the tests need the unet binary: -Dunet.bin=" + bin
                    + " is not executable (build it with cargo build --profile ci)");
        }
        Files.deleteIfExists(Path.of(socket));
        ProcessBuilder pb = new ProcessBuilder(bin, "daemon", "--socket", socket, "--udp", "127.0.0.1:0");
        pb.redirectErrorStream(true);
        Process daemon = pb.start();
        BufferedReader r = new BufferedReader(new InputStreamReader(daemon.getInputStream(), StandardCharsets.UTF_8));
        String line = r.readLine();
        if (line == null || !line.startsWith("unet daemon: control socket") || !line.contains("UDP wire ")) {
            throw new IllegalStateException("unet daemon did not start: " + line);
        }
        String udp = line.substring(line.lastIndexOf("UDP wire ") + "UDP wire ".length()).trim();
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
        return new Daemon(daemon, socket, udp);
    }

    /** A JVM running {@code main} of {@code cls} with {@code args}, its output piped. */
    static Process jvm(Class<?> cls, String... args) throws IOException {
        return jvmOn(null, cls, args);
    }

    /**
     * A JVM running {@code main} of {@code cls} whose engine is the daemon
     * at {@code socket} (null: this JVM's).
     */
    static Process jvmOn(String socket, Class<?> cls, String... args) throws IOException {
        List<String> cmd = new ArrayList<>();
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        cmd.add("--enable-native-access=ALL-UNNAMED");
        cmd.add("-Dunet.library=" + System.getProperty("unet.library"));
        cmd.add("-cp");
        cmd.add(System.getProperty("java.class.path"));
        cmd.add(cls.getName());
        cmd.addAll(List.of(args));
        ProcessBuilder pb = new ProcessBuilder(cmd);
        if (socket != null) {
            pb.environment().put("UNET_SOCKET", socket);
        }
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
