package org.rmqspark.gateway;

import io.grpc.Server;
import io.grpc.ServerInterceptors;
import io.grpc.netty.shaded.io.grpc.netty.GrpcSslContexts;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.netty.shaded.io.netty.handler.ssl.ClientAuth;
import io.grpc.netty.shaded.io.netty.handler.ssl.SslContextBuilder;

import java.io.File;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.time.Clock;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

/**
 * The pull gateway's life cycle: a gRPC server for {@code apache.rocketmq.v2.MessagingService} (the six methods of
 * {@link MessagingServiceImpl}) in front of a RocketMQ cluster reached through its name server.
 */
public final class PullGateway {
    /** Largest request accepted (a SendMessage batch): RocketMQ's default 4 MiB message limit, with room. */
    private static final int MAX_INBOUND_BYTES = 16 * 1024 * 1024;

    private final Server server;
    private final BrokerClient client;
    private final String address;
    private final File certificate;
    private boolean stopped;

    private PullGateway(Server server, BrokerClient client, String address, File certificate) {
        this.server = server;
        this.client = client;
        this.address = address;
        this.certificate = certificate;
    }

    /** Starts the RocketMQ client and the gRPC server; the config is validated first. */
    public static PullGateway start(GatewayConfig config) throws Exception {
        config.validate();
        BrokerClient client = BrokerClient.start(config);
        try {
            NettyServerBuilder b = NettyServerBuilder
                .forAddress(new InetSocketAddress(InetAddress.getByName(config.bindHost), config.port))
                .maxInboundMessageSize(MAX_INBOUND_BYTES)
                .permitKeepAliveTime(10, TimeUnit.SECONDS)
                .permitKeepAliveWithoutCalls(true);
            if (config.tls()) {
                SslContextBuilder ssl = GrpcSslContexts.forServer(config.tlsCert, config.tlsKey);
                if (config.tlsClientCa != null) {
                    ssl.trustManager(config.tlsClientCa).clientAuth(ClientAuth.REQUIRE);
                }
                b.sslContext(ssl.build());
            }
            BrokerDirectory directory = new BrokerDirectory(client);
            // QueryRoute's last-resort endpoints name the listen address, known once the server is bound
            AtomicReference<HostPort> listen = new AtomicReference<>();
            MessagingServiceImpl service = new MessagingServiceImpl(
                new RouteHandler(directory, config.advertise == null ? null : HostPort.parse(config.advertise),
                    listen::get),
                new OffsetHandler(client, directory),
                new PullHandler(client, directory, config.maxMessageBytes),
                new SendHandler(client, directory, config.maxMessageBytes),
                directory);
            b.addService(ServerInterceptors.intercept(service, new CallerAuth(config.usersView(), Clock.systemUTC()), new CallMetadata()));
            Server server = b.build();
            server.start();
            listen.set(HostPort.of(listenHost(config.bindHost), server.getPort()));
            return new PullGateway(server, client, listen.get().toString(), config.tlsCert);
        } catch (Exception | Error e) {
            client.shutdown();
            throw e;
        }
    }

    /**
     * The host to name for a bind address: the host itself, or this machine's address for a wildcard bind (the
     * wildcard itself when the machine's name does not resolve).
     */
    private static String listenHost(String bindHost) throws Exception {
        InetAddress a = InetAddress.getByName(bindHost);
        if (!a.isAnyLocalAddress()) {
            return bindHost;
        }
        try {
            return InetAddress.getLocalHost().getHostAddress();
        } catch (java.net.UnknownHostException e) {
            return bindHost;
        }
    }

    /** "host:port" the gateway listens on ("[v6]:port" for an IPv6 host). */
    public String address() {
        return address;
    }

    /** The server certificate file when serving TLS, else null. */
    public File certificate() {
        return certificate;
    }

    /** Stops taking calls, lets running ones finish (at most {@code graceMs}), then stops the RocketMQ client. */
    public synchronized void shutdown(long graceMs) {
        if (stopped) {
            return;
        }
        stopped = true;
        server.shutdown();
        try {
            if (!server.awaitTermination(graceMs, TimeUnit.MILLISECONDS)) {
                server.shutdownNow();
                server.awaitTermination(2, TimeUnit.SECONDS);
            }
        } catch (InterruptedException e) {
            server.shutdownNow();
            Thread.currentThread().interrupt();
        }
        client.shutdown();
    }

    /** Blocks until the server has stopped. */
    public void awaitTermination() throws InterruptedException {
        server.awaitTermination();
    }
}
