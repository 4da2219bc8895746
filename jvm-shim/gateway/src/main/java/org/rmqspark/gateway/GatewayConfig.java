package org.rmqspark.gateway;

import java.io.File;
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
    /** Callers' access key -> secret key; empty: callers need no credentials. */
    public final Map<String, String> users = new LinkedHashMap<>();
    /** The gateway's own credentials towards the brokers (AclClientRPCHook); null: unsigned requests. */
    public String brokerAccessKey;
    public String brokerSecretKey;
    /** Talk TLS to the brokers and name servers. */
    public boolean brokerTls;
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

    Map<String, String> usersView() {
        return Collections.unmodifiableMap(users);
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
