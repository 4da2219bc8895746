package org.rmqspark.gateway;

import com.google.gson.GsonBuilder;
import com.google.gson.JsonObject;

import java.io.File;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;

/**
 * {@code java -jar rmq-gateway.jar ...}: the pull gateway alone, in front of an existing RocketMQ cluster. Prints one
 * {@code READY {...}} line on stdout once it serves, then serves until SIGTERM or SIGINT (a graceful stop: no new
 * calls, running calls get a few seconds). See GATEWAY.md.
 */
public final class GatewayMain {
    private static final String USAGE = String.join("\n",
        "usage: java -jar rmq-gateway.jar --namesrv HOST:PORT[;HOST:PORT] [options]",
        "  --port N                    listen port (default 8081; 0 = any free port)",
        "  --bind ADDRESS              listen address (default 0.0.0.0)",
        "  --advertise HOST:PORT       address QueryRoute hands out (default: the one the caller used)",
        "  --tls-cert FILE --tls-key FILE   serve TLS with this PEM certificate chain and PKCS#8 key",
        "  --user AK:SK                require callers to sign as this user (repeatable)",
        "  --broker-access-key AK --broker-secret-key SK   sign requests to the brokers (ACL)",
        "  --broker-tls                talk TLS to the name servers and brokers",
        "  --request-timeout-ms N      timeout of each broker request (default 10000)",
        "  --log-dir DIR               RocketMQ client log directory (default: a temporary one)");

    private GatewayMain() {
    }

    public static void main(String[] args) {
        GatewayConfig config = new GatewayConfig();
        config.bindHost = "0.0.0.0";
        config.port = 8081;
        String logDir = null;
        try {
            for (int i = 0; i < args.length; i++) {
                String a = args[i];
                if (a.equals("--help") || a.equals("-h")) {
                    System.out.println(USAGE);
                    return;
                }
                if (a.equals("--broker-tls")) {
                    config.brokerTls = true;
                    continue;
                }
                String v = value(args, i++);
                switch (a) {
                    case "--namesrv": config.nameServer = v; break;
                    case "--port": config.port = Integer.parseInt(v); break;
                    case "--bind": config.bindHost = v; break;
                    case "--advertise": config.advertise = v; break;
                    case "--tls-cert": config.tlsCert = new File(v); break;
                    case "--tls-key": config.tlsKey = new File(v); break;
                    case "--user": addUser(config, v); break;
                    case "--broker-access-key": config.brokerAccessKey = v; break;
                    case "--broker-secret-key": config.brokerSecretKey = v; break;
                    case "--request-timeout-ms": config.requestTimeoutMs = Long.parseLong(v); break;
                    case "--log-dir": logDir = v; break;
                    default: throw new IllegalArgumentException("unknown argument: " + a);
                }
            }
            config.validate();
        } catch (RuntimeException e) {
            System.err.println("rmq-gateway: " + e.getMessage() + "\n" + USAGE);
            System.exit(2);
            return;
        }
        // stdout carries the READY line only; whatever a library prints goes to stderr
        PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);
        System.setOut(System.err);
        try {
            File logs = logDir != null ? new File(logDir) : Files.createTempDirectory("rmq-shim-gateway-").toFile();
            Files.createDirectories(logs.toPath());
            configureRocketMqProperties(logs, config.brokerTls);
        } catch (Exception e) {
            System.err.println("rmq-gateway: cannot create the log directory: " + e);
            System.exit(1);
            return;
        }

        PullGateway gateway;
        try {
            gateway = PullGateway.start(config);
        } catch (Throwable t) {
            System.err.println("rmq-gateway: start failed: " + Statuses.describe(t));
            t.printStackTrace(System.err);
            System.exit(1);
            return;
        }
        // SIGTERM/SIGINT: stop gracefully and exit 0; the hook covers any other way the JVM ends
        Runtime.getRuntime().addShutdownHook(new Thread(() -> gateway.shutdown(5_000), "gateway-shutdown"));
        for (String sig : new String[] {"TERM", "INT"}) {
            try {
                sun.misc.Signal.handle(new sun.misc.Signal(sig), s -> new Thread(() -> {
                    System.err.println("rmq-gateway: SIG" + sig + ", stopping");
                    gateway.shutdown(5_000);
                    System.exit(0);
                }, "gateway-sig" + sig.toLowerCase()).start());
            } catch (Throwable t) {
                System.err.println("rmq-gateway: no SIG" + sig + " handler (" + t + "); relying on the shutdown hook");
            }
        }

        JsonObject ready = new JsonObject();
        ready.addProperty("gateway", gateway.address());
        ready.addProperty("advertise", config.advertise);
        ready.addProperty("nameServer", config.nameServer);
        ready.addProperty("tls", config.tls());
        ready.addProperty("callerAuth", config.callerAuth());
        ready.addProperty("brokerAuth", config.brokerAccessKey != null);
        ready.addProperty("logDir", System.getProperty("rmq.logdir"));
        out.println("READY " + new GsonBuilder().serializeNulls().create().toJson(ready));
        try {
            gateway.awaitTermination();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static String value(String[] args, int i) {
        if (i + 1 >= args.length) {
            throw new IllegalArgumentException(args[i] + " needs a value");
        }
        return args[i + 1];
    }

    private static void addUser(GatewayConfig config, String accessAndSecret) {
        int colon = accessAndSecret.indexOf(':');
        if (colon <= 0 || colon == accessAndSecret.length() - 1) {
            throw new IllegalArgumentException("--user needs ACCESS_KEY:SECRET_KEY");
        }
        config.users.put(accessAndSecret.substring(0, colon), accessAndSecret.substring(colon + 1));
    }

    /** Before any RocketMQ class loads: logging into {@code logs}, the request version, the client TLS default. */
    private static void configureRocketMqProperties(File logs, boolean brokerTls) {
        System.setProperty("rmq.logdir", logs.getAbsolutePath());
        if (System.getProperty("rmq.loglevel") == null) {
            System.setProperty("rmq.loglevel", "INFO");
        }
        System.setProperty("rocketmq.client.logRoot", logs.getAbsolutePath());
        System.setProperty("logging.path", logs.getAbsolutePath());
        System.setProperty("com.rocketmq.sendMessageWithVIPChannel", "false");
        System.setProperty("rocketmq.remoting.version",
            Integer.toString(org.apache.rocketmq.common.MQVersion.CURRENT_VERSION));
        System.setProperty("tls.enable", Boolean.toString(brokerTls));
    }
}
