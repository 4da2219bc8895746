package org.rmqspark.gateway;

import com.google.gson.GsonBuilder;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;

import java.io.File;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;

/**
 * {@code java -jar rmq-gateway.jar ...}: the pull gateway alone, in front of an existing RocketMQ cluster. Prints one
 * {@code READY {...}} line on stdout once it serves, then serves until SIGTERM or SIGINT (a graceful stop: no new
 * calls, running calls get a few seconds). Safe by default: it listens on loopback, refuses another address without
 * caller authentication, takes secrets from files or the environment only (never the command line, which other
 * users of the machine can read), and verifies the brokers' TLS certificates. See jvm-shim/gateway/README.md.
 */
public final class GatewayMain {
    static final String BROKER_ACCESS_KEY_ENV = "RMQ_GATEWAY_BROKER_ACCESS_KEY";
    static final String BROKER_SECRET_KEY_ENV = "RMQ_GATEWAY_BROKER_SECRET_KEY";
    private static final String USAGE = String.join("\n",
        "usage: java -jar rmq-gateway.jar --namesrv HOST:PORT[;HOST:PORT] [options]",
        "  --port N                    listen port (default 8081; 0 = any free port)",
        "  --bind ADDRESS              listen address (default 127.0.0.1); another one needs --users-file",
        "  --allow-anonymous-remote-callers   serve a non-loopback address without caller authentication",
        "  --advertise HOST:PORT       address QueryRoute hands out (default: the one the caller used)",
        "  --tls-cert FILE --tls-key FILE   serve TLS with this PEM certificate chain and PKCS#8 key",
        "  --tls-client-ca FILE        require TLS client certificates signed by these PEM CAs (mutual TLS)",
        "  --users-file FILE           JSON: callers, their secret keys and permissions (see jvm-shim/gateway/README.md)",
        "  --broker-credentials-file FILE   JSON {\"accessKey\": ..., \"secretKey\": ...}: sign requests to the",
        "                              brokers (ACL); or the environment " + BROKER_ACCESS_KEY_ENV + " / "
            + BROKER_SECRET_KEY_ENV,
        "  --broker-tls                talk TLS to the name servers and brokers, verifying their certificates",
        "  --broker-tls-ca FILE        PEM CAs to verify them with (default: the JVM's trusted CAs)",
        "  --broker-tls-insecure       do not verify them (test clusters with self-signed certificates)",
        "  --broker-tls-cert FILE --broker-tls-key FILE   client certificate for brokers that require one",
        "  --max-message-bytes N       the most a message body may decompress to (default 16777216)",
        "  --request-timeout-ms N      timeout of each broker request (default 10000)",
        "  --log-dir DIR               RocketMQ client log directory (default: a temporary one)");

    private GatewayMain() {
    }

    public static void main(String[] args) {
        GatewayConfig config = new GatewayConfig();
        config.port = 8081;
        String logDir = null;
        try {
            for (int i = 0; i < args.length; i++) {
                String a = args[i];
                switch (a) {
                    case "--help": case "-h": System.out.println(USAGE); return;
                    case "--broker-tls": config.brokerTls = true; continue;
                    case "--broker-tls-insecure": config.brokerTlsInsecure = true; continue;
                    case "--allow-anonymous-remote-callers": config.allowAnonymousRemote = true; continue;
                    case "--user": case "--broker-access-key": case "--broker-secret-key":
                        throw new IllegalArgumentException(a + " is not accepted: a secret on the command line is "
                            + "visible to every user of the machine (ps); use --users-file, and "
                            + "--broker-credentials-file or " + BROKER_ACCESS_KEY_ENV + "/" + BROKER_SECRET_KEY_ENV);
                    default: break;
                }
                String v = value(args, i++);
                switch (a) {
                    case "--namesrv": config.nameServer = v; break;
                    case "--port": config.port = Integer.parseInt(v); break;
                    case "--bind": config.bindHost = v; break;
                    case "--advertise": config.advertise = v; break;
                    case "--tls-cert": config.tlsCert = new File(v); break;
                    case "--tls-key": config.tlsKey = new File(v); break;
                    case "--tls-client-ca": config.tlsClientCa = new File(v); break;
                    case "--users-file": config.loadUsers(new File(v)); break;
                    case "--broker-credentials-file": brokerCredentials(config, new File(v)); break;
                    case "--broker-tls-ca": config.brokerTlsCa = new File(v); break;
                    case "--broker-tls-cert": config.brokerTlsCert = new File(v); break;
                    case "--broker-tls-key": config.brokerTlsKey = new File(v); break;
                    case "--max-message-bytes": config.maxMessageBytes = Integer.parseInt(v); break;
                    case "--request-timeout-ms": config.requestTimeoutMs = Long.parseLong(v); break;
                    case "--log-dir": logDir = v; break;
                    default: throw new IllegalArgumentException("unknown argument: " + a);
                }
            }
            if (config.brokerAccessKey == null && System.getenv(BROKER_ACCESS_KEY_ENV) != null) {
                config.brokerAccessKey = System.getenv(BROKER_ACCESS_KEY_ENV);
                config.brokerSecretKey = System.getenv(BROKER_SECRET_KEY_ENV);
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
            File logs = logDir != null ? new File(logDir) : Files.createTempDirectory("rmq-gateway-").toFile();
            Files.createDirectories(logs.toPath());
            configureRocketMqProperties(logs, config);
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

    /** The gateway's broker credentials from a JSON file {"accessKey": ..., "secretKey": ...}. */
    private static void brokerCredentials(GatewayConfig config, File file) {
        try {
            JsonObject o = JsonParser.parseString(Files.readString(file.toPath(), StandardCharsets.UTF_8))
                .getAsJsonObject();
            config.brokerAccessKey = o.get("accessKey").getAsString();
            config.brokerSecretKey = o.get("secretKey").getAsString();
        } catch (Exception e) {
            throw new IllegalArgumentException("the broker credentials file " + file + " must be readable JSON "
                + "{\"accessKey\": ..., \"secretKey\": ...}");
        }
    }

    /**
     * Before any RocketMQ class loads: logging into {@code logs}, the request version, and TLS towards the brokers
     * (RocketMQ's client trusts any certificate in its default "test mode": that is switched off).
     */
    private static void configureRocketMqProperties(File logs, GatewayConfig config) {
        System.setProperty("rmq.logdir", logs.getAbsolutePath());
        if (System.getProperty("rmq.loglevel") == null) {
            System.setProperty("rmq.loglevel", "INFO");
        }
        System.setProperty("rocketmq.client.logRoot", logs.getAbsolutePath());
        System.setProperty("logging.path", logs.getAbsolutePath());
        System.setProperty("com.rocketmq.sendMessageWithVIPChannel", "false");
        System.setProperty("rocketmq.remoting.version",
            Integer.toString(org.apache.rocketmq.common.MQVersion.CURRENT_VERSION));
        System.setProperty("tls.enable", Boolean.toString(config.brokerTls));
        System.setProperty("tls.config.file", new File(logs, "no-tls.properties").getPath()); // not /etc/rocketmq
        System.setProperty("tls.test.mode.enable", "false");
        System.setProperty("tls.client.authServer", Boolean.toString(!config.brokerTlsInsecure));
        if (config.brokerTlsCa != null) {
            System.setProperty("tls.client.trustCertPath", config.brokerTlsCa.getPath());
        }
        if (config.brokerTlsCert != null) {
            System.setProperty("tls.client.certPath", config.brokerTlsCert.getPath());
            System.setProperty("tls.client.keyPath", config.brokerTlsKey.getPath());
        }
    }
}
