package org.rmqspark.gateway;

import java.io.File;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;

/** Everything the pull gateway needs to start: where it listens, whom it serves, and how it reaches the cluster. */
public final class GatewayConfig {
    /** Name server address(es), "host:port[;host:port]". */
    public String nameServer;
    /** Address to bind; "0.0.0.0" for every interface. */
    public String bindHost = "127.0.0.1";
    /** Listen port; 0 lets the kernel choose. */
    public int port = 0;
    /** "host:port" that QueryRoute hands out as the brokers' endpoints; null: what the caller used, else the bind. */
    public String advertise;
    /** TLS server certificate chain and PKCS#8 private key (PEM); both null for plain TCP. */
    public File tlsCert;
    public File tlsKey;
    /** PEM CA certificates; when set, callers must present a TLS client certificate they signed (mutual TLS). */
    public File tlsClientCa;
    /** Callers by access key, with their permissions; empty: callers need no credentials (loopback only). */
    private final Map<String, Caller> users = new LinkedHashMap<>();
    /** Serve callers without credentials on an address other than loopback (anyone who reaches it may read). */
    public boolean allowAnonymousRemote;
    /** The gateway's own credentials towards the brokers (AclClientRPCHook); null: unsigned requests. */
    public String brokerAccessKey;
    public String brokerSecretKey;
    /** Talk TLS to the brokers and name servers, verifying their certificates with {@link #brokerTlsCa} (else the
     *  JVM's trusted CAs) unless {@link #brokerTlsInsecure}; with a client certificate for mutual TLS. */
    public boolean brokerTls;
    public File brokerTlsCa;
    public boolean brokerTlsInsecure;
    public File brokerTlsCert;
    public File brokerTlsKey;
    /** The most a message body may decompress to (pulled bodies and GZIP sends). */
    public int maxMessageBytes = 16 << 20;
    /** Timeout of each broker or name-server request (a long-polling pull waits this much beyond its hold). */
    public long requestTimeoutMs = 10_000;
    /** Instance name of the gateway's RocketMQ client (unique within the JVM). */
    public String clientInstanceName = "rmq-shim-gateway";

    public boolean tls() {
        return tlsCert != null;
    }

    public boolean callerAuth() {
        return !users.isEmpty();
    }

    /** A user who may do everything (the embedded gateway's). */
    public void addSuperUser(String accessKey, String secretKey) {
        users.put(accessKey, Caller.superUser(accessKey, secretKey));
    }

    /** The users of a JSON users file (see {@link Caller}); IllegalArgumentException naming the problem. */
    public void loadUsers(File file) {
        users.putAll(Caller.load(file));
    }

    Map<String, Caller> usersView() {
        return Collections.unmodifiableMap(users);
    }

    /** True when {@link #bindHost} is a loopback address (only this machine can connect). */
    public boolean loopbackOnly() {
        try {
            return InetAddress.getByName(bindHost).isLoopbackAddress();
        } catch (UnknownHostException e) {
            throw new IllegalArgumentException("the bind address " + bindHost + " is not an address of this machine");
        }
    }

    /** Checks the combination of options; throws IllegalArgumentException naming the problem. */
    public void validate() {
        if (nameServer == null || nameServer.isBlank()) {
            throw new IllegalArgumentException("the name server address is required");
        }
        if (port < 0 || port > 65535) {
            throw new IllegalArgumentException("port must be within 0..65535");
        }
        if ((tlsCert == null) != (tlsKey == null)) {
            throw new IllegalArgumentException("the TLS certificate and key go together");
        }
        if (tlsCert != null && !tlsCert.isFile()) {
            throw new IllegalArgumentException("TLS certificate file not found: " + tlsCert);
        }
        if (tlsKey != null && !tlsKey.isFile()) {
            throw new IllegalArgumentException("TLS key file not found: " + tlsKey);
        }
        if (tlsClientCa != null && (tlsCert == null || !tlsClientCa.isFile())) {
            throw new IllegalArgumentException(tlsCert == null ? "client certificates need TLS (a certificate and key)"
                : "TLS client CA file not found: " + tlsClientCa);
        }
        if (!loopbackOnly() && users.isEmpty() && !allowAnonymousRemote) {
            throw new IllegalArgumentException("refusing to serve " + bindHost + " without caller authentication: anyone "
                + "who reaches it could read, write and commit with the gateway's broker credentials. Give users "
                + "(--users-file), bind 127.0.0.1, or add --allow-anonymous-remote-callers if that is what you want");
        }
        if ((brokerTlsCert == null) != (brokerTlsKey == null)) {
            throw new IllegalArgumentException("the broker TLS client certificate and key go together");
        }
        for (File f : new File[] {brokerTlsCa, brokerTlsCert, brokerTlsKey}) {
            if (f != null && !f.isFile()) {
                throw new IllegalArgumentException("broker TLS file not found: " + f);
            }
        }
        if (brokerTlsCa != null && brokerTlsInsecure) {
            throw new IllegalArgumentException("a broker TLS CA and --broker-tls-insecure exclude each other");
        }
        if (maxMessageBytes < 1024) {
            throw new IllegalArgumentException("the max message size must be at least 1024 bytes");
        }
        if ((brokerAccessKey == null) != (brokerSecretKey == null)) {
            throw new IllegalArgumentException("the broker access key and secret key go together");
        }
        if (advertise != null) {
            HostPort.parse(advertise);
        }
        if (requestTimeoutMs <= 0) {
            throw new IllegalArgumentException("the request timeout must be positive");
        }
    }
}
