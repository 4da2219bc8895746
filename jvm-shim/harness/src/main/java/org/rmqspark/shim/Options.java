package org.rmqspark.shim;

import java.util.ArrayList;
import java.util.List;

/** Command-line options of the shim. Plain Java only: parsed before any RocketMQ class is loaded. */
final class Options {
    int brokers = 1;
    /** Slaves per broker group (classic master-slave replication); 0 = masters only. */
    int slaves = 0;
    /** Slaves serve pulls (slaveReadEnable); off, they refuse them as RocketMQ's default deployments do. */
    boolean slaveRead = true;
    /**
     * Slave-acting-master mode: the name server lists a group's first slave at brokerId 0 while its master is away
     * (supportActingMaster), and the brokers take part (enableSlaveActingMaster).
     */
    boolean actingMaster = false;
    /** Store root; null means a fresh temporary directory that is deleted at exit. */
    String storeDir;
    int namesrvPort = 0;
    /** Explicit broker listen ports (may be shorter than {@link #brokers}; the rest are picked). */
    final List<Integer> brokerPorts = new ArrayList<>();
    String authAccessKey;
    String authSecretKey;
    int commitLogFileSize = 100 * 1024 * 1024;
    /** Entries per consume-queue file; 0 keeps RocketMQ's default (300000). */
    int cqFileEntries = 0;
    /** Servers accept TLS (self-signed test certificate) beside plain TCP: RocketMQ's "permissive" mode. */
    boolean tls = false;
    /** TLS with a private CA: its server certificate, and a client certificate of it required (implies tls). */
    boolean tlsCa = false;
    /** Start the pull gateway beside the cluster (on by default). */
    boolean gateway = true;
    /** Gateway listen port on 127.0.0.1; 0 = any free port. */
    int gatewayPort = 0;
    /** Also run the stock Apache RocketMQ gRPC proxy in front of the cluster (see {@link StockProxy}). */
    boolean stockProxy = false;

    boolean authEnabled() {
        return authAccessKey != null;
    }

    static Options parse(String[] args) {
        Options o = new Options();
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            String v = (i + 1 < args.length) ? args[i + 1] : null;
            switch (a) {
                case "--brokers": o.brokers = Integer.parseInt(need(a, v)); i++; break;
                case "--slaves": o.slaves = Integer.parseInt(need(a, v)); i++; break;
                case "--no-slave-read": o.slaveRead = false; break;
                case "--acting-master": o.actingMaster = true; break;
                case "--store": o.storeDir = need(a, v); i++; break;
                case "--namesrv-port": o.namesrvPort = Integer.parseInt(need(a, v)); i++; break;
                case "--broker-ports":
                    for (String p : need(a, v).split(",")) {
                        if (!p.isBlank()) {
                            o.brokerPorts.add(Integer.parseInt(p.trim()));
                        }
                    }
                    i++;
                    break;
                case "--auth-access-key": o.authAccessKey = need(a, v); i++; break;
                case "--auth-secret-key": o.authSecretKey = need(a, v); i++; break;
                case "--commitlog-file-size": o.commitLogFileSize = Integer.parseInt(need(a, v)); i++; break;
                case "--cq-file-entries": o.cqFileEntries = Integer.parseInt(need(a, v)); i++; break;
                case "--tls": o.tls = true; break;
                case "--tls-ca": o.tls = true; o.tlsCa = true; break;
                case "--gateway-port": o.gatewayPort = Integer.parseInt(need(a, v)); i++; break;
                case "--no-gateway": o.gateway = false; break;
                case "--stock-proxy": o.stockProxy = true; break;
                default: throw new IllegalArgumentException("unknown argument: " + a);
            }
        }
        if (o.brokers < 1 || o.brokers > 26) {
            throw new IllegalArgumentException("--brokers must be within 1..26");
        }
        if (o.slaves < 0 || o.slaves > 2) {
            throw new IllegalArgumentException("--slaves must be within 0..2");
        }
        if ((o.authAccessKey == null) != (o.authSecretKey == null)) {
            throw new IllegalArgumentException("--auth-access-key and --auth-secret-key go together");
        }
        if (o.gatewayPort < 0 || o.gatewayPort > 65535) {
            throw new IllegalArgumentException("--gateway-port must be within 0..65535");
        }
        if (o.brokerPorts.size() > o.brokers) {
            throw new IllegalArgumentException("more --broker-ports than --brokers");
        }
        return o;
    }

    private static String need(String flag, String value) {
        if (value == null) {
            throw new IllegalArgumentException(flag + " needs a value");
        }
        return value;
    }
}
