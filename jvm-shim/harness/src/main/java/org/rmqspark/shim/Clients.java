package org.rmqspark.shim;

import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.ClientConfig;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.remoting.RPCHook;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * The shim's own official RocketMQ clients (admin, producer, pull consumer), created on first use. With auth on, all
 * of them sign their requests with the super user's AK/SK (AclClientRPCHook).
 */
final class Clients {
    static final String PRODUCER_GROUP = "rmq-shim-producer";
    static final String CONSUMER_GROUP = "rmq-shim-reader";

    private final String namesrv;
    private final RPCHook hook;
    private DefaultMQAdminExt admin;
    private DefaultMQProducer producer;
    private DefaultMQPullConsumer consumer;
    /** Producers and pull consumers in a namespace (ClientConfig.setNamespace), by namespace. */
    private final java.util.Map<String, DefaultMQProducer> namespacedProducers = new java.util.HashMap<>();
    private final java.util.Map<String, DefaultMQPullConsumer> namespacedConsumers = new java.util.HashMap<>();
    /** Push consumers started by tests, by group: another application's live consumers of a group. */
    private final java.util.Map<String, DefaultMQPushConsumer> pushConsumers = new java.util.HashMap<>();

    Clients(String namesrv, String accessKey, String secretKey) {
        this.namesrv = namesrv;
        this.hook = accessKey == null ? null : newHook(accessKey, secretKey);
    }

    /** The signing hook of the shim's clients (null without auth). */
    RPCHook hook() {
        return hook;
    }

    static RPCHook newHook(String accessKey, String secretKey) {
        return new AclClientRPCHook(new SessionCredentials(accessKey, secretKey));
    }

    private void configure(ClientConfig c, String instance) {
        c.setNamesrvAddr(namesrv);
        c.setInstanceName(instance);
        c.setVipChannelEnabled(false);
        c.setPollNameServerInterval(1000);
        c.setHeartbeatBrokerInterval(10_000);
    }

    synchronized DefaultMQAdminExt admin() throws MQClientException {
        if (admin == null) {
            DefaultMQAdminExt a = hook == null ? new DefaultMQAdminExt(5000) : new DefaultMQAdminExt(hook, 5000);
            configure(a, "rmq-shim-admin");
            a.setAdminExtGroup("rmq-shim-admin");
            a.start();
            admin = a;
        }
        return admin;
    }

    synchronized DefaultMQProducer producer() throws MQClientException {
        if (producer == null) {
            producer = newProducer(PRODUCER_GROUP, hook, "rmq-shim-producer");
        }
        return producer;
    }

    /** The producer of {@code namespace} (null: the shim's own, in none), as RocketMQ's clients take one. */
    @SuppressWarnings("deprecation")
    synchronized DefaultMQProducer producer(String namespace) throws MQClientException {
        if (namespace == null) {
            return producer();
        }
        DefaultMQProducer p = namespacedProducers.get(namespace);
        if (p == null) {
            p = newProducer(PRODUCER_GROUP, hook, "rmq-shim-producer-" + namespace, namespace);
            namespacedProducers.put(namespace, p);
        }
        return p;
    }

    /** A producer with an arbitrary hook (null: unsigned); the caller shuts it down. */
    DefaultMQProducer newProducer(String group, RPCHook rpcHook, String instance) throws MQClientException {
        return newProducer(group, rpcHook, instance, null);
    }

    @SuppressWarnings("deprecation")
    private DefaultMQProducer newProducer(String group, RPCHook rpcHook, String instance, String namespace)
        throws MQClientException {
        DefaultMQProducer p = new DefaultMQProducer(group, rpcHook);
        configure(p, instance);
        if (namespace != null) {
            p.setNamespace(namespace);
        }
        p.setSendMsgTimeout(10_000);
        p.setRetryTimesWhenSendFailed(2);
        p.setMaxMessageSize(4 * 1024 * 1024);
        p.start();
        return p;
    }

    /**
     * A started transactional producer in {@code group} (benchmarks.write's transactional lines) whose local
     * transactions are decided by {@code listener}; the caller shuts it down.
     */
    TransactionMQProducer newTransactionProducer(String group, TransactionListener listener)
        throws MQClientException {
        TransactionMQProducer p = new TransactionMQProducer(group, hook);
        configure(p, "rmq-shim-tx-" + group);
        p.setTransactionListener(listener);
        p.setSendMsgTimeout(10_000);
        p.setRetryTimesWhenSendFailed(2);
        p.setMaxMessageSize(4 * 1024 * 1024);
        p.start();
        return p;
    }

    synchronized DefaultMQPullConsumer consumer() throws MQClientException {
        if (consumer == null) {
            consumer = newConsumer("rmq-shim-reader", null);
        }
        return consumer;
    }

    /** The pull consumer of {@code namespace} (null: the shim's own, in none). */
    synchronized DefaultMQPullConsumer consumer(String namespace) throws MQClientException {
        if (namespace == null) {
            return consumer();
        }
        DefaultMQPullConsumer c = namespacedConsumers.get(namespace);
        if (c == null) {
            c = newConsumer("rmq-shim-reader-" + namespace, namespace);
            namespacedConsumers.put(namespace, c);
        }
        return c;
    }

    @SuppressWarnings("deprecation")
    private DefaultMQPullConsumer newConsumer(String instance, String namespace) throws MQClientException {
        DefaultMQPullConsumer c = new DefaultMQPullConsumer(CONSUMER_GROUP, hook);
        configure(c, instance);
        if (namespace != null) {
            c.setNamespace(namespace);
        }
        c.setConsumerPullTimeoutMillis(10_000);
        c.start();
        return c;
    }

    /**
     * Starts a push consumer in {@code group} subscribed to every message of {@code topic} (it acknowledges what it
     * receives) and returns its client id once it has sent its first heartbeat, so the brokers list it.
     */
    synchronized String startPushConsumer(String group, String topic) throws MQClientException {
        if (pushConsumers.containsKey(group)) {
            throw new IllegalStateException("a consumer of group " + group + " is already running");
        }
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(group, hook, new AllocateMessageQueueAveragely());
        configure(c, "rmq-shim-consumer-" + group);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET);
        c.subscribe(topic, "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> ConsumeConcurrentlyStatus.CONSUME_SUCCESS);
        c.start();
        c.getDefaultMQPushConsumerImpl().getmQClientFactory().sendHeartbeatToAllBrokerWithLock();
        pushConsumers.put(group, c);
        return c.buildMQClientId();
    }

    synchronized void stopPushConsumer(String group) {
        DefaultMQPushConsumer c = pushConsumers.remove(group);
        if (c == null) {
            throw new IllegalStateException("no consumer of group " + group + " is running");
        }
        c.shutdown();
    }

    synchronized void shutdown() {
        for (DefaultMQPushConsumer c : pushConsumers.values()) {
            quietly(c::shutdown);
        }
        pushConsumers.clear();
        for (DefaultMQPullConsumer c : namespacedConsumers.values()) {
            quietly(c::shutdown);
        }
        namespacedConsumers.clear();
        for (DefaultMQProducer p : namespacedProducers.values()) {
            quietly(p::shutdown);
        }
        namespacedProducers.clear();
        if (consumer != null) {
            quietly(consumer::shutdown);
            consumer = null;
        }
        if (producer != null) {
            quietly(producer::shutdown);
            producer = null;
        }
        if (admin != null) {
            quietly(admin::shutdown);
            admin = null;
        }
    }

    private static void quietly(Runnable r) {
        try {
            r.run();
        } catch (Throwable t) {
            System.err.println("rmq-shim: client shutdown failed: " + t);
        }
    }
}
