package org.rmqspark.shim;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import org.rmqspark.gateway.GatewayConfig;
import org.rmqspark.gateway.PullGateway;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;

/**
 * Entry point: embedded RocketMQ (name server + brokers) driven over stdin/stdout.
 *
 * <p>Prints {@code READY {...}} once every broker is registered, then answers each stdin line (a JSON command
 * {@code {"id":..,"cmd":..,...}}) with one {@code RESULT {...}} line. Stops on end of stdin, on a "shutdown"
 * command or on SIGTERM.
 */
public final class Main {
    private static final Object LOCK = new Object();
    /** Queue marker for the end of stdin (compared by identity). */
    private static final String END_OF_INPUT = new String("<end of input>");
    private static boolean stopped;
    private static EmbeddedCluster cluster;
    private static Clients clients;
    private static PullGateway gateway;
    private static StockProxy stockProxy;
    private static File tempRoot;

    private Main() {
    }

    public static void main(String[] args) {
        Options options;
        try {
            options = Options.parse(args);
        } catch (RuntimeException e) {
            System.err.println("rmq-shim: " + e.getMessage());
            System.exit(2);
            return;
        }
        Protocol.install();
        File root;
        try {
            root = prepareRoot(options);
        } catch (IOException e) {
            System.err.println("rmq-shim: cannot create store dir: " + e);
            System.exit(2);
            return;
        }
        Certificates certificates;
        try {
            certificates = options.tlsCa ? Certificates.privateCa(new File(root, "tls"))
                : options.tls ? Certificates.selfSigned(new File(root, "tls")) : null;
        } catch (Exception e) {
            System.err.println("rmq-shim: cannot create the test certificates: " + e);
            System.exit(2);
            return;
        }
        configureRocketMqProperties(root, certificates, options.tlsCa);
        installSignalHandlers();
        Runtime.getRuntime().addShutdownHook(new Thread(Main::stop, "shim-shutdown-hook"));

        long t0 = System.nanoTime();
        try {
            synchronized (LOCK) {
                cluster = new EmbeddedCluster(options, root);
            }
            cluster.start();
            synchronized (LOCK) {
                clients = new Clients(cluster.nameServerAddress(), options.authAccessKey, options.authSecretKey);
            }
            if (options.gateway) {
                PullGateway g = startGateway(options, cluster, certificates);
                synchronized (LOCK) {
                    gateway = g;
                }
            }
            if (options.stockProxy) {
                long tp = System.nanoTime();
                StockProxy p = StockProxy.start(cluster, options);
                synchronized (LOCK) {
                    stockProxy = p;
                }
                System.err.printf("rmq-shim: stock proxy on %s in %.2f s%n", p.address(), (System.nanoTime() - tp) / 1e9);
            }
        } catch (Throwable t) {
            System.err.println("rmq-shim: start failed: " + Protocol.describe(t));
            t.printStackTrace(System.err);
            exit(1);
            return;
        }
        System.err.printf("rmq-shim: ready in %.2f s%n", (System.nanoTime() - t0) / 1e9);
        JsonObject ready = cluster.readyInfo();
        if (gateway != null) {
            ready.addProperty("gateway", gateway.address());
        }
        if (stockProxy != null) {
            ready.addProperty("stockProxy", stockProxy.address());
        }
        if (certificates != null) {  // a self-signed certificate is its own CA
            ready.addProperty("tlsCa", (options.tlsCa ? certificates.ca : certificates.certificate).getAbsolutePath());
        }
        if (options.tlsCa) {
            ready.addProperty("tlsClientCert", certificates.clientCertificate.getAbsolutePath());
            ready.addProperty("tlsClientKey", certificates.clientKey.getAbsolutePath());
        }
        Protocol.ready(ready);

        Commands commands = new Commands(cluster, clients);
        BlockingQueue<String> lines = startStdinReader();
        while (true) {
            String line;
            try {
                line = lines.take();
            } catch (InterruptedException e) {
                break;
            }
            if (line == END_OF_INPUT) {
                break;
            }
            if (line.isBlank()) {
                continue;
            }
            JsonElement id = null;
            try {
                JsonObject req = JsonParser.parseString(line).getAsJsonObject();
                id = req.get("id");
                String cmd = req.has("cmd") ? req.get("cmd").getAsString() : "";
                if (cmd.equals("shutdown")) {
                    stop();
                    Protocol.ok(id, null);
                    exit(0);
                    return;
                }
                Protocol.ok(id, commands.run(cmd, new Args(req)));
            } catch (Throwable t) {
                Protocol.error(id, t);
            }
        }
        // End of stdin: the parent is gone or done with us.
        exit(0);
    }

    /**
     * Reads stdin lines on a thread of its own. At end of input the command loop stops after the running command;
     * should that command still run 15 s later, the reader stops the process itself: a JVM whose parent is gone must
     * not stay behind.
     */
    private static BlockingQueue<String> startStdinReader() {
        BlockingQueue<String> lines = new LinkedBlockingQueue<>();
        Thread reader = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = in.readLine()) != null) {
                    lines.add(line);
                }
            } catch (IOException e) {
                System.err.println("rmq-shim: stdin failed: " + e);
            }
            lines.add(END_OF_INPUT);
            try {
                Thread.sleep(15_000);
            } catch (InterruptedException e) {
                return;
            }
            System.err.println("rmq-shim: stdin closed during a long command; stopping now");
            exit(0);
        }, "shim-stdin");
        reader.setDaemon(true);
        reader.start();
        return lines;
    }

    /** Cleans up, then exits; a watchdog halts the JVM if the clean-up hangs. */
    private static void exit(int code) {
        Thread watchdog = new Thread(() -> {
            try {
                Thread.sleep(20_000);
            } catch (InterruptedException ignored) {
                return;
            }
            System.err.println("rmq-shim: shutdown took too long, halting");
            Runtime.getRuntime().halt(code);
        }, "shim-exit-watchdog");
        watchdog.setDaemon(true);
        watchdog.start();
        stop();
        System.exit(code);
    }

    /** Idempotent: clients, the stock proxy, brokers, name server, then the temporary store. */
    static void stop() {
        synchronized (LOCK) {
            if (stopped) {
                return;
            }
            stopped = true;
            long t0 = System.nanoTime();
            ShutdownAccelerator acc = ShutdownAccelerator.start(Thread.currentThread());
            if (gateway != null) {
                gateway.shutdown(2_000);
            }
            if (clients != null) {
                clients.shutdown();
            }
            if (stockProxy != null) {
                stockProxy.shutdown();
            }
            long t1 = System.nanoTime();
            if (cluster != null) {
                cluster.shutdown();
            }
            long t2 = System.nanoTime();
            if (tempRoot != null) {
                deleteTree(tempRoot.toPath());
            }
            long t3 = System.nanoTime();
            acc.close();
            System.err.printf("rmq-shim: stopped in %.2f s (gateway and clients %.2f, cluster %.2f, "
                + "store removal %.2f)%n",
                (t3 - t0) / 1e9, (t1 - t0) / 1e9, (t2 - t1) / 1e9, (t3 - t2) / 1e9);
        }
    }

    /**
     * The pull gateway on 127.0.0.1 in front of the embedded name server. With auth it requires the cluster's user
     * from callers and signs its broker requests as that user; with --tls it serves TLS with a self-signed
     * certificate for localhost/127.0.0.1, with --tls-ca the CA's server certificate, requiring a client
     * certificate of that CA.
     */
    private static PullGateway startGateway(Options options, EmbeddedCluster cluster, Certificates certificates)
        throws Exception {
        GatewayConfig config = new GatewayConfig();
        config.nameServer = cluster.nameServerAddress();
        config.bindHost = EmbeddedCluster.HOST;
        config.port = options.gatewayPort;
        if (options.authEnabled()) {
            config.addSuperUser(options.authAccessKey, options.authSecretKey);
            config.brokerAccessKey = options.authAccessKey;
            config.brokerSecretKey = options.authSecretKey;
        }
        if (certificates != null) {
            config.tlsCert = certificates.certificate;
            config.tlsKey = certificates.privateKey;
            config.tlsClientCa = certificates.ca;
        }
        return PullGateway.start(config);
    }

    private static File prepareRoot(Options options) throws IOException {
        if (options.storeDir != null) {
            File f = new File(options.storeDir).getAbsoluteFile();
            Files.createDirectories(f.toPath());
            return f;
        }
        File f = Files.createTempDirectory("rmq-shim-").toFile().getAbsoluteFile();
        tempRoot = f;
        return f;
    }

    /**
     * Must run before any RocketMQ class is loaded: their loggers and defaults read these once. With {@code ca}
     * (--tls-ca) the name server and brokers serve its server certificate and require a client certificate of the
     * CA on TLS connections (mutual TLS; plain connections, used between the servers, stay allowed).
     */
    private static void configureRocketMqProperties(File root, Certificates certificates, boolean requireClients) {
        File logs = new File(root, "logs");
        logs.mkdirs();
        System.setProperty("rmq.logdir", logs.getAbsolutePath());
        if (System.getProperty("rmq.loglevel") == null) {
            System.setProperty("rmq.loglevel", "INFO");
        }
        // RocketMQ derives defaults (store paths, client log/offset files) from user.home and rocketmq.home.dir:
        // keep all of that inside the store root.
        System.setProperty("user.home", root.getAbsolutePath());
        System.setProperty("rocketmq.home.dir", root.getAbsolutePath());
        System.setProperty("rocketmq.client.logRoot", logs.getAbsolutePath());
        System.setProperty("com.rocketmq.sendMessageWithVIPChannel", "false");
        // The protocol version stamped on every request. RocketMQ's own start-up classes set it; without it every
        // request says version 0 and, e.g., the name server reads a broker's registration in the pre-3.0.11
        // format and drops all of its topics.
        System.setProperty("rocketmq.remoting.version",
            Integer.toString(org.apache.rocketmq.common.MQVersion.CURRENT_VERSION));
        // Plain TCP unless asked: "permissive" TLS (plain and TLS on the same port) with the shim's certificate, the
        // one the gateway serves, so that clients verify every server against one file (RocketMQ's own test mode
        // would generate a certificate nobody can trust).
        System.setProperty("tls.server.mode", certificates != null ? "permissive" : "disabled");
        System.setProperty("tls.enable", "false");
        if (certificates != null) {
            System.setProperty("tls.config.file", new File(root, "tls/none.properties").getPath()); // not /etc
            System.setProperty("tls.test.mode.enable", "false");
            System.setProperty("tls.server.certPath", certificates.certificate.getPath());
            System.setProperty("tls.server.keyPath", certificates.privateKey.getPath());
        }
        if (requireClients) {
            System.setProperty("tls.server.authClient", "true");
            System.setProperty("tls.server.trustCertPath", certificates.ca.getPath());
            System.setProperty("tls.server.need.client.auth", "require");
        }
        // jraft/sofa (unused, but on the class path) would otherwise log under ~/logs
        System.setProperty("logging.path", logs.getAbsolutePath());
    }

    private static void installSignalHandlers() {
        try {
            sun.misc.Signal.handle(new sun.misc.Signal("TERM"), sig -> new Thread(() -> exit(0), "shim-sigterm").start());
        } catch (Throwable t) {
            System.err.println("rmq-shim: no SIGTERM handler (" + t + "); relying on the shutdown hook");
        }
    }

    private static void deleteTree(Path p) {
        if (!Files.exists(p)) {
            return;
        }
        try {
            Files.walkFileTree(p, new SimpleFileVisitor<>() {
                @Override
                public FileVisitResult visitFile(Path file, BasicFileAttributes attrs) throws IOException {
                    Files.deleteIfExists(file);
                    return FileVisitResult.CONTINUE;
                }

                @Override
                public FileVisitResult visitFileFailed(Path file, IOException exc) {
                    return FileVisitResult.CONTINUE;
                }

                @Override
                public FileVisitResult postVisitDirectory(Path dir, IOException exc) throws IOException {
                    Files.deleteIfExists(dir);
                    return FileVisitResult.CONTINUE;
                }
            });
        } catch (IOException e) {
            System.err.println("rmq-shim: could not delete " + p + ": " + e);
        }
    }
}
