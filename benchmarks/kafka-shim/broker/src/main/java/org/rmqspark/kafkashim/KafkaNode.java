package org.rmqspark.kafkashim;

import java.nio.file.Path;
import java.util.Properties;

import kafka.server.KafkaConfig;
import kafka.server.KafkaRaftServer;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.metadata.storage.Formatter;
import org.apache.kafka.server.common.MetadataVersion;

/** A single-node KRaft Kafka (broker and controller in this JVM) on loopback, its log in {@code logDir}. */
final class KafkaNode implements AutoCloseable {
    private final KafkaRaftServer server;
    private final String bootstrap;

    private KafkaNode(KafkaRaftServer server, String bootstrap) {
        this.server = server;
        this.bootstrap = bootstrap;
    }

    static KafkaNode start(Path logDir, int brokerPort, int controllerPort) throws Exception {
        String dir = logDir.toAbsolutePath().toString();
        Properties p = new Properties();
        p.put("process.roles", "broker,controller");
        p.put("node.id", "1");
        p.put("controller.quorum.voters", "1@127.0.0.1:" + controllerPort);
        p.put("listeners", "PLAINTEXT://127.0.0.1:" + brokerPort + ",CONTROLLER://127.0.0.1:" + controllerPort);
        p.put("advertised.listeners", "PLAINTEXT://127.0.0.1:" + brokerPort);
        p.put("listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT");
        p.put("controller.listener.names", "CONTROLLER");
        p.put("inter.broker.listener.name", "PLAINTEXT");
        p.put("log.dirs", dir);
        // one node: every internal topic with one replica
        p.put("offsets.topic.replication.factor", "1");
        p.put("transaction.state.log.replication.factor", "1");
        p.put("transaction.state.log.min.isr", "1");
        p.put("share.coordinator.state.topic.replication.factor", "1");
        p.put("share.coordinator.state.topic.min.isr", "1");
        p.put("group.initial.rebalance.delay.ms", "0");
        new Formatter()
            .setPrintStream(System.err)
            .setClusterId(Uuid.randomUuid().toString())
            .setNodeId(1)
            .setControllerListenerName("CONTROLLER")
            .setMetadataLogDirectory(dir)
            .addDirectory(dir)
            .setReleaseVersion(MetadataVersion.LATEST_PRODUCTION)
            .run();
        KafkaRaftServer server = new KafkaRaftServer(KafkaConfig.fromProps(p, false), Time.SYSTEM);
        server.startup();
        return new KafkaNode(server, "127.0.0.1:" + brokerPort);
    }

    String bootstrap() {
        return bootstrap;
    }

    @Override
    public void close() {
        server.shutdown();
        server.awaitShutdown();
    }
}
