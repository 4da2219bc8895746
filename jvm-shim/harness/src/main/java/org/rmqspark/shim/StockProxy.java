package org.rmqspark.shim;

import com.google.gson.JsonObject;
import io.grpc.Server;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.netty.shaded.io.netty.channel.nio.NioEventLoopGroup;
import io.grpc.netty.shaded.io.netty.channel.socket.nio.NioServerSocketChannel;
import io.grpc.protobuf.services.ChannelzService;
import io.grpc.protobuf.services.ProtoReflectionService;
import org.apache.rocketmq.auth.authentication.provider.DefaultAuthenticationProvider;
import org.apache.rocketmq.auth.authorization.provider.DefaultAuthorizationProvider;
import org.apache.rocketmq.auth.config.AuthConfig;
import org.apache.rocketmq.common.thread.ThreadPoolMonitor;
import org.apache.rocketmq.common.utils.StartAndShutdown;
import org.apache.rocketmq.proxy.auth.ProxyAuthenticationMetadataProvider;
import org.apache.rocketmq.proxy.auth.ProxyAuthorizationMetadataProvider;
import org.apache.rocketmq.proxy.config.Configuration;
import org.apache.rocketmq.proxy.config.ConfigurationManager;
import org.apache.rocketmq.proxy.config.ProxyConfig;
import org.apache.rocketmq.proxy.grpc.interceptor.ContextInterceptor;
import org.apache.rocketmq.proxy.grpc.interceptor.GlobalExceptionInterceptor;
import org.apache.rocketmq.proxy.grpc.interceptor.HeaderInterceptor;
import org.apache.rocketmq.proxy.grpc.v2.GrpcMessagingApplication;
import org.apache.rocketmq.proxy.metrics.ProxyMetricsManager;
import org.apache.rocketmq.proxy.processor.DefaultMessagingProcessor;

import java.io.File;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;

/**
 * The stock Apache RocketMQ gRPC proxy (rocketmq-proxy, CLUSTER mode) in this JVM, in front of the embedded cluster
 * ({@code --stock-proxy}). It is there for tests that need a real server which answers UNIMPLEMENTED for the
 * MessagingService methods the stock proxy lacks (PullMessage, UpdateOffset, GetOffset, QueryOffset).
 *
 * <p>Assembled like {@code ProxyStartup.main} (which cannot be reused: it reads the command line, keeps its parts in a
 * private static list, registers its own shutdown hook and calls System.exit on failure), with these differences:
 * no remoting-protocol server (only the gRPC endpoint is wanted); the gRPC server listens on 127.0.0.1 rather than
 * on all interfaces and speaks plaintext HTTP/2 only (no TLS detection, no HAProxy protocol); no certificate file
 * watcher, no thread-pool monitor thread, and every pool is small. The gRPC services, interceptors and the messaging
 * processor (with its cluster-mode services) are the stock ones. Like any stock cluster-mode proxy it creates the
 * topic DefaultHeartBeatSyncerTopic (and %RETRY%CID_DefaultHeartBeatSyncerTopic) in the cluster and keeps a
 * broadcast push consumer (group CID_DefaultHeartBeatSyncerTopic) on it.
 *
 * <p>The proxy's configuration is JVM-global (static ConfigurationManager): one stock proxy per JVM.
 */
final class StockProxy {
    private final List<StartAndShutdown> parts = new ArrayList<>();
    private final List<Runnable> closers = new ArrayList<>();
    private int port;

    private StockProxy() {
    }

    String address() {
        return EmbeddedCluster.HOST + ":" + port;
    }

    static StockProxy start(EmbeddedCluster cluster, Options options) throws Exception {
        StockProxy p = new StockProxy();
        try {
            p.doStart(cluster, options);
        } catch (Exception | Error e) {
            p.shutdown();
            throw e;
        }
        return p;
    }

    private void doStart(EmbeddedCluster cluster, Options options) throws Exception {
        // A throwaway proxy home with the one config file the proxy insists on reading.
        File home = new File(cluster.root(), "stock-proxy");
        File conf = new File(home, "conf");
        Files.createDirectories(conf.toPath());
        port = Ports.pick();
        JsonObject json = new JsonObject();
        json.addProperty("proxyMode", "cluster");
        json.addProperty("proxyName", "rmq-shim-stock-proxy"); // also the auth providers' cache key: not a broker's
        json.addProperty("rocketMQClusterName", EmbeddedCluster.CLUSTER);
        json.addProperty("namesrvAddr", cluster.nameServerAddress());
        json.addProperty("localServeAddr", EmbeddedCluster.HOST); // else a scan of the network interfaces
        json.addProperty("grpcServerPort", port);
        File configFile = new File(conf, "rmq-proxy.json");
        Files.writeString(configFile.toPath(), Protocol.GSON.toJson(json), StandardCharsets.UTF_8);
        System.setProperty(ConfigurationManager.RMQ_PROXY_HOME, home.getAbsolutePath());
        System.setProperty(Configuration.CONFIG_PATH_PROPERTY, configFile.getAbsolutePath());
        ConfigurationManager.initEnv();
        ConfigurationManager.initConfig();

        ProxyConfig pc = ConfigurationManager.getProxyConfig();
        pc.setRocketmqMQClientNum(1);
        pc.setGrpcThreadPoolNums(2);
        pc.setGrpcRouteThreadPoolNums(1);
        pc.setGrpcProducerThreadPoolNums(1);
        pc.setGrpcConsumerThreadPoolNums(1);
        pc.setGrpcClientManagerThreadPoolNums(1);
        pc.setGrpcTransactionThreadPoolNums(1);
        pc.setProducerProcessorThreadPoolNums(1);
        pc.setConsumerProcessorThreadPoolNums(1);
        pc.setTopicRouteServiceThreadPoolNums(1);
        pc.setMetadataThreadPoolNums(1);
        pc.setTransactionHeartbeatThreadPoolNums(1);
        pc.setRenewThreadPoolNums(1);
        pc.setRenewMaxThreadPoolNums(1);
        pc.setReturnHandleGroupThreadPoolNums(1);
        pc.setEnablePrintJstack(false);
        if (options.authEnabled()) {
            // As the cluster: the proxy authenticates and authorizes its gRPC clients against the users and ACLs
            // the brokers hold (fetched through the Proxy*MetadataProviders), and signs its own requests to the
            // brokers with the cluster's super user.
            pc.setEnableAclRpcHookForClusterMode(true);
            AuthConfig ac = ConfigurationManager.getAuthConfig();
            JsonObject cred = new JsonObject();
            cred.addProperty("accessKey", options.authAccessKey);
            cred.addProperty("secretKey", options.authSecretKey);
            ac.setInnerClientAuthenticationCredentials(Protocol.GSON.toJson(cred));
            ac.setAuthenticationEnabled(true);
            ac.setAuthenticationProvider(DefaultAuthenticationProvider.class.getName());
            ac.setAuthenticationMetadataProvider(ProxyAuthenticationMetadataProvider.class.getName());
            ac.setAuthorizationEnabled(true);
            ac.setAuthorizationProvider(DefaultAuthorizationProvider.class.getName());
            ac.setAuthorizationMetadataProvider(ProxyAuthorizationMetadataProvider.class.getName());
        }

        ThreadPoolExecutor executor = ThreadPoolMonitor.createAndMonitor(pc.getGrpcThreadPoolNums(),
            pc.getGrpcThreadPoolNums(), 1, TimeUnit.MINUTES, "GrpcRequestExecutorThread",
            pc.getGrpcThreadPoolQueueCapacity());
        closers.add(executor::shutdownNow);

        // Same parts, same order as ProxyStartup (shut down in reverse).
        DefaultMessagingProcessor processor = DefaultMessagingProcessor.createForClusterMode();
        parts.add(ProxyMetricsManager.initClusterMode(pc));
        parts.add(processor);
        GrpcMessagingApplication application = GrpcMessagingApplication.create(processor);
        parts.add(application);

        NioEventLoopGroup boss = new NioEventLoopGroup(1);
        NioEventLoopGroup worker = new NioEventLoopGroup(1);
        closers.add(() -> boss.shutdownGracefully(0, 1, TimeUnit.SECONDS));
        closers.add(() -> worker.shutdownGracefully(0, 1, TimeUnit.SECONDS));
        // As GrpcServerBuilder, but bound to the loopback address (GrpcServerBuilder binds all interfaces) and
        // plaintext only: the stock ProxyAndTlsProtocolNegotiator (TLS or plaintext, HAProxy headers) builds an SSL
        // context with a freshly generated self-signed certificate at construction, 1-3 s of start-up here.
        NettyServerBuilder builder = NettyServerBuilder.forAddress(new InetSocketAddress(EmbeddedCluster.HOST, port))
            .maxConcurrentCallsPerConnection(pc.getGrpcMaxConcurrentCallsPerConnection())
            .bossEventLoopGroup(boss)
            .workerEventLoopGroup(worker)
            .channelType(NioServerSocketChannel.class)
            .maxInboundMessageSize(pc.getGrpcMaxInboundMessageSize())
            .maxConnectionIdle(pc.getGrpcClientIdleTimeMills(), TimeUnit.MILLISECONDS);
        builder.executor(executor)
            .addService(application)
            .addService(ChannelzService.newInstance(100))
            .addService(ProtoReflectionService.newInstance())
            .intercept(new GlobalExceptionInterceptor())
            .intercept(new ContextInterceptor())
            .intercept(new HeaderInterceptor());
        Server server = builder.build();
        parts.add(new StartAndShutdown() {
            @Override
            public void start() throws Exception {
                server.start();
            }

            @Override
            public void shutdown() throws Exception {
                server.shutdownNow();
                server.awaitTermination(2, TimeUnit.SECONDS);
            }
        });

        for (int i = 0; i < parts.size(); i++) {
            try {
                parts.get(i).start();
            } catch (Exception e) {
                parts.subList(i, parts.size()).clear(); // shut down only what has started
                throw e;
            }
        }
    }

    /** Idempotent; never throws. */
    synchronized void shutdown() {
        for (int i = parts.size() - 1; i >= 0; i--) {
            try {
                parts.get(i).shutdown();
            } catch (Throwable t) {
                System.err.println("rmq-shim: stock proxy part shutdown failed: " + Protocol.describe(t));
            }
        }
        parts.clear();
        for (Runnable r : closers) {
            try {
                r.run();
            } catch (Throwable t) {
                System.err.println("rmq-shim: stock proxy shutdown failed: " + Protocol.describe(t));
            }
        }
        closers.clear();
    }
}
