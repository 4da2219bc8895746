package org.rmqspark.gateway;

import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.impl.MQClientAPIImpl;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.remoting.RPCHook;

/**
 * The gateway's one official RocketMQ client towards the cluster: a DefaultMQProducer for sends, and its client
 * instance's MQClientAPIImpl for route, pull and offset requests. Signs every request with the gateway's own
 * credentials when it has them.
 */
final class BrokerClient {
    static final String PRODUCER_GROUP = "rmq-shim-gateway";

    private final DefaultMQProducer producer;
    private final long timeoutMs;

    private BrokerClient(DefaultMQProducer producer, long timeoutMs) {
        this.producer = producer;
        this.timeoutMs = timeoutMs;
    }

    static BrokerClient start(GatewayConfig config) throws MQClientException {
        RPCHook hook = config.brokerAccessKey == null ? null
            : new AclClientRPCHook(new SessionCredentials(config.brokerAccessKey, config.brokerSecretKey));
        DefaultMQProducer p = new DefaultMQProducer(PRODUCER_GROUP, hook);
        p.setNamesrvAddr(config.nameServer);
        p.setInstanceName(config.clientInstanceName);
        p.setVipChannelEnabled(false);
        p.setUseTLS(config.brokerTls);
        p.setPollNameServerInterval(2000);
        p.setHeartbeatBrokerInterval(10_000);
        p.setSendMsgTimeout((int) Math.min(Integer.MAX_VALUE, config.requestTimeoutMs));
        p.setMqClientApiTimeout((int) Math.min(Integer.MAX_VALUE, config.requestTimeoutMs));
        p.setRetryTimesWhenSendFailed(2);
        p.setMaxMessageSize(4 * 1024 * 1024);
        p.start();
        return new BrokerClient(p, config.requestTimeoutMs);
    }

    DefaultMQProducer producer() {
        return producer;
    }

    MQClientAPIImpl api() {
        return producer.getDefaultMQProducerImpl().getMqClientFactory().getMQClientAPIImpl();
    }

    long timeoutMs() {
        return timeoutMs;
    }

    void shutdown() {
        producer.shutdown();
    }
}
