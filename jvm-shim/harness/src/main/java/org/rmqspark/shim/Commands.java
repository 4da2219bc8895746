package org.rmqspark.shim;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonPrimitive;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.constant.PermName;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.RPCHook;
import org.apache.rocketmq.remoting.protocol.NamespaceUtil;
import org.apache.rocketmq.remoting.protocol.ResponseCode;
import org.apache.rocketmq.remoting.protocol.admin.TopicOffset;
import org.apache.rocketmq.remoting.protocol.admin.TopicStatsTable;
import org.apache.rocketmq.remoting.protocol.header.QueryConsumerOffsetRequestHeader;
import org.apache.rocketmq.remoting.protocol.route.QueueData;
import org.apache.rocketmq.remoting.protocol.route.TopicRouteData;
import org.apache.rocketmq.remoting.protocol.subscription.SubscriptionGroupConfig;
import org.apache.rocketmq.remoting.protocol.statictopic.TopicConfigAndQueueMapping;
import org.apache.rocketmq.remoting.protocol.statictopic.TopicQueueMappingInfo;
import org.apache.rocketmq.remoting.protocol.statictopic.TopicQueueMappingUtils;
import org.apache.rocketmq.remoting.protocol.statictopic.TopicRemappingDetailWrapper;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;
import org.apache.rocketmq.tools.admin.MQAdminUtils;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.LongSupplier;

/** The stdin commands (except shutdown, handled by Main). Each returns the JSON "result" or throws. */
final class Commands {
    private static final Comparator<MessageQueue> QUEUE_ORDER =
        Comparator.comparing(MessageQueue::getBrokerName).thenComparingInt(MessageQueue::getQueueId);
    private static final long TIMEOUT_MS = 10_000;
    // what the consume and offsets commands wait at most for the brokers to dispatch what they stored
    private static final long DISPATCH_WAIT_MS = 5_000;

    private final EmbeddedCluster cluster;
    private final Clients clients;
    private final AtomicInteger tmpClients = new AtomicInteger();
    private final BenchReaders bench;

    Commands(EmbeddedCluster cluster, Clients clients) {
        this.cluster = cluster;
        this.clients = clients;
        this.bench = new BenchReaders(cluster, clients);
    }

    JsonElement run(String cmd, Args a) throws Exception {
        switch (cmd) {
            case "ping": return new JsonPrimitive("pong");
            case "createTopic": return createTopic(a);
            case "createStaticTopic": return createStaticTopic(a);
            case "remapStaticTopic": return remapStaticTopic(a);
            case "stopBroker": return stopBroker(a);
            case "startBroker": return startBroker(a);
            case "stopNamesrv": cluster.stopNamesrv(); return null;
            case "startNamesrv": cluster.restartNamesrv(); return null;
            case "startConsumer": return new JsonPrimitive(clients.startPushConsumer(a.str("group"), a.str("topic")));
            case "stopConsumer": clients.stopPushConsumer(a.str("group")); return null;
            case "produce": return produce(a);
            case "produceBulk": return produceBulk(a);
            case "produceTransactional": return produceTransactional(a);
            case "consume": return consume(a);
            case "offsets": return offsets(a.str("topic"));
            case "searchOffset": return searchOffset(a);
            case "queryConsumerOffset": return queryConsumerOffset(a);
            case "updateConsumerOffset": return updateConsumerOffset(a);
            case "earliestMsgStoreTime": return earliestMsgStoreTime(a);
            case "deleteOldFiles": return deleteOldFiles(a);
            case "correctQueues":
                return StoreMaintenance.correctQueues(a.str("broker"), cluster.runningController(a.str("broker")));
            case "clusterInfo": return cluster.readyInfo();
            case "route": return route(a.str("topic"));
            case "requestCounts": return RequestCounter.INSTANCE.snapshot();
            case "benchJavaLitePull": return bench.javaLitePull(a);
            case "benchCeiling": return bench.ceiling(a);
            case "benchProduceRate": return bench.produceRate(a);
            default: throw new IllegalArgumentException("unknown command: " + cmd);
        }
    }

    // ---------------------------------------------------------------- cluster

    private JsonElement createTopic(Args a) throws Exception {
        String topic = a.str("topic");
        int queues = a.integer("queues");
        List<String> targets = new ArrayList<>();
        if (a.has("broker")) {
            targets.add(cluster.broker(a.str("broker")).name);
        } else {
            for (EmbeddedCluster.Broker b : cluster.brokers()) {
                if (b.running()) {
                    targets.add(b.name);
                }
            }
        }
        DefaultMQAdminExt admin = clients.admin();
        for (String name : targets) {
            TopicConfig tc = new TopicConfig(topic, queues, queues, PermName.PERM_READ | PermName.PERM_WRITE);
            if (a.has("attributes")) {
                for (Map.Entry<String, JsonElement> e : a.get("attributes").getAsJsonObject().entrySet()) {
                    tc.getAttributes().put(e.getKey(), e.getValue().getAsString());
                }
            }
            admin.createAndUpdateTopicConfig(cluster.broker(name).address(), tc);
            cluster.syncSlaves(name);
        }
        long start = System.currentTimeMillis();
        boolean forced = false;
        while (!cluster.routeShows(topic, targets, queues)) {
            long waited = System.currentTimeMillis() - start;
            if (waited > 10_000) {
                throw new IllegalStateException("route of topic " + topic + " did not show " + queues
                    + " queues on " + targets + " within 10 s");
            }
            if (!forced && waited > 1_500) {
                for (String name : targets) {
                    cluster.runningController(name).registerBrokerAll(true, false, true);
                }
                forced = true;
            }
            EmbeddedCluster.sleep(20);
        }
        return null;
    }

    /**
     * A static topic (RocketMQ 5 logic queues) of "queues" logic queues over every running broker group, created as
     * mqadmin updateStaticTopic does; waits until the name server's route carries its queue mapping.
     */
    private JsonElement createStaticTopic(Args a) throws Exception {
        String topic = a.str("topic");
        Set<String> targets = new HashSet<>();
        for (EmbeddedCluster.Broker b : cluster.brokers()) {
            if (b.running() && b.id == 0) {
                targets.add(b.name);
            }
        }
        DefaultMQAdminExt admin = clients.admin();
        Map<String, TopicConfigAndQueueMapping> configs = MQAdminUtils.examineTopicConfigAll(topic, admin);
        TopicQueueMappingUtils.createTopicConfigMapping(topic, a.integer("queues"), targets, configs);
        MQAdminUtils.completeNoTargetBrokers(configs, admin);
        MQAdminUtils.updateTopicConfigMappingAll(configs, admin, false);
        long deadline = System.currentTimeMillis() + 10_000;
        while (true) {
            TopicRouteData r = cluster.route(topic);
            if (r != null && r.getTopicQueueMappingByBroker() != null
                && r.getTopicQueueMappingByBroker().keySet().containsAll(targets)) {
                return null;
            }
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("route of static topic " + topic + " did not show its queue "
                    + "mapping on " + targets + " within 10 s");
            }
            for (String name : targets) {
                cluster.runningController(name).registerBrokerAll(true, false, true);
            }
            EmbeddedCluster.sleep(50);
        }
    }

    /**
     * Moves the logic queues of static topic "topic" onto the broker groups "brokers", as mqadmin
     * remappingStaticTopic does (each moved queue gets a new mapping item on its new leader, whose logic offsets
     * start on the next 10,000 block); waits until the name server's route shows every logic queue on them.
     */
    private JsonElement remapStaticTopic(Args a) throws Exception {
        String topic = a.str("topic");
        Set<String> targets = new HashSet<>();
        for (JsonElement e : a.array("brokers")) {
            targets.add(e.getAsString());
        }
        DefaultMQAdminExt admin = clients.admin();
        Map<String, TopicConfigAndQueueMapping> configs = MQAdminUtils.examineTopicConfigAll(topic, admin);
        TopicRemappingDetailWrapper wrapper = TopicQueueMappingUtils.remappingStaticTopic(topic, configs, targets);
        MQAdminUtils.completeNoTargetBrokers(wrapper.getBrokerConfigMap(), admin);
        MQAdminUtils.remappingStaticTopic(topic, wrapper.getBrokerToMapIn(), wrapper.getBrokerToMapOut(),
            wrapper.getBrokerConfigMap(), 10000, false, admin);
        for (String name : wrapper.getBrokerConfigMap().keySet()) {
            // a leader asks older items' brokers by name: learn their addresses now, not at the first 10 s refresh
            cluster.runningController(name).getBrokerOuterAPI().refreshMetadata();
        }
        long deadline = System.currentTimeMillis() + 10_000;
        while (true) {
            TopicRouteData r = cluster.route(topic);
            int led = 0;
            if (r != null && r.getTopicQueueMappingByBroker() != null) {
                for (Map.Entry<String, TopicQueueMappingInfo> e : r.getTopicQueueMappingByBroker().entrySet()) {
                    led += targets.contains(e.getKey()) ? e.getValue().getCurrIdMap().size() : 0;
                }
            }
            if (led == wrapper.getBrokerConfigMap().values().iterator().next().getMappingDetail().getTotalQueues()) {
                return null;
            }
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("route of static topic " + topic + " did not show its logic queues "
                    + "on " + targets + " within 10 s");
            }
            for (String name : wrapper.getBrokerConfigMap().keySet()) {
                cluster.runningController(name).registerBrokerAll(true, false, true);
            }
            EmbeddedCluster.sleep(50);
        }
    }

    /** The name server's route of a topic: [{brokerName, readQueueNums, writeQueueNums, perm}], or null. */
    private JsonElement route(String topic) {
        TopicRouteData r = cluster.route(topic);
        if (r == null) {
            return null;
        }
        JsonArray out = new JsonArray();
        List<QueueData> qds = new ArrayList<>(r.getQueueDatas());
        qds.sort(Comparator.comparing(QueueData::getBrokerName));
        for (QueueData qd : qds) {
            JsonObject o = new JsonObject();
            o.addProperty("brokerName", qd.getBrokerName());
            o.addProperty("readQueueNums", qd.getReadQueueNums());
            o.addProperty("writeQueueNums", qd.getWriteQueueNums());
            o.addProperty("perm", qd.getPerm());
            out.add(o);
        }
        return out;
    }

    /** "broker" names the group; "brokerId" (default 0, the master) the member. */
    private EmbeddedCluster.Broker member(Args a) {
        return cluster.broker(a.str("broker"), a.lng("brokerId", 0L));
    }

    private JsonElement stopBroker(Args a) throws Exception {
        cluster.stopBroker(member(a));
        return null;
    }

    private JsonElement startBroker(Args a) throws Exception {
        cluster.startBroker(member(a), true);
        return null;
    }

    private JsonElement deleteOldFiles(Args a) {
        String name = a.str("broker");
        return StoreMaintenance.deleteOldFiles(name, cluster.runningController(name), a.bool("correctQueues", true));
    }

    // ---------------------------------------------------------------- producing

    private JsonElement produce(Args a) throws Exception {
        String topic = a.str("topic");
        JsonArray input = a.array("messages");
        boolean batch = a.bool("batch", false);

        // Optional: send with other credentials (auth tests): "unsigned": true, or "signAs": {accessKey, secretKey}.
        DefaultMQProducer producer;
        boolean temporary = false;
        if (a.bool("unsigned", false) || a.has("signAs")) {
            RPCHook hook = null;
            if (a.has("signAs")) {
                JsonObject s = a.get("signAs").getAsJsonObject();
                hook = Clients.newHook(s.get("accessKey").getAsString(), s.get("secretKey").getAsString());
            }
            producer = clients.newProducer("rmq-shim-producer-tmp", hook, "rmq-shim-tmp-" + tmpClients.incrementAndGet());
            producer.setRetryTimesWhenSendFailed(0);
            temporary = true;
        } else {
            producer = clients.producer(a.str("namespace", null));
        }
        try {
            refreshRoute(producer, NamespaceUtil.wrapNamespace(a.str("namespace", null), topic));
            List<Message> msgs = new ArrayList<>();
            for (JsonElement e : input) {
                msgs.add(MessageJson.toMessage(topic, e.getAsJsonObject()));
            }
            JsonArray out = new JsonArray();
            if (batch) {
                if (msgs.isEmpty()) {
                    return out;
                }
                JsonObject first = input.get(0).getAsJsonObject();
                MessageQueue mq = targetQueue(topic, a.has("broker") || a.has("queueId") ? null : first, a, 0);
                SendResult r = mq == null ? producer.send(msgs, TIMEOUT_MS) : producer.send(msgs, mq, TIMEOUT_MS);
                MessageJson.batchResults(r, msgs.size()).forEach(out::add);
            } else {
                for (int i = 0; i < msgs.size(); i++) {
                    MessageQueue mq = targetQueue(topic, input.get(i).getAsJsonObject(), null, i);
                    SendResult r = mq == null ? producer.send(msgs.get(i), TIMEOUT_MS)
                        : producer.send(msgs.get(i), mq, TIMEOUT_MS);
                    out.add(MessageJson.sendResult(r));
                }
            }
            cluster.waitDispatched(5_000);
            return out;
        } finally {
            if (temporary) {
                producer.shutdown();
            }
        }
    }

    /** Refreshes the producer's route of the topic; while the name server is down it keeps the route it has. */
    private static void refreshRoute(DefaultMQProducer producer, String topic) {
        try {
            producer.getDefaultMQProducerImpl().getMqClientFactory().updateTopicRouteInfoFromNameServer(topic);
        } catch (RuntimeException e) {
            System.err.println("rmq-shim: route of " + topic + " not refreshed (" + Protocol.describe(e)
                + "); using the one the producer has");
        }
    }

    /**
     * The queue named by "broker"/"queueId" of the message (or of the command args when msg is null); null when
     * neither is given. A broker without queueId gets its queues in turn; a queueId without broker is taken on the
     * first broker (by name) that has it.
     */
    private MessageQueue targetQueue(String topic, JsonObject msg, Args args, int index) {
        String broker = null;
        Integer queueId = null;
        if (msg != null) {
            if (msg.has("broker") && !msg.get("broker").isJsonNull()) {
                broker = msg.get("broker").getAsString();
            }
            if (msg.has("queueId") && !msg.get("queueId").isJsonNull()) {
                queueId = msg.get("queueId").getAsInt();
            }
        } else if (args != null) {
            broker = args.str("broker", null);
            queueId = args.integer("queueId", null);
        }
        if (broker == null && queueId == null) {
            return null;
        }
        if (broker != null && queueId != null) {
            return new MessageQueue(topic, broker, queueId);
        }
        List<MessageQueue> all = routeQueues(topic, true);
        List<MessageQueue> matching = new ArrayList<>();
        for (MessageQueue mq : all) {
            if ((broker == null || broker.equals(mq.getBrokerName())) && (queueId == null || queueId == mq.getQueueId())) {
                matching.add(mq);
            }
        }
        if (matching.isEmpty()) {
            throw new IllegalArgumentException("no write queue of topic " + topic + " matches broker=" + broker
                + " queueId=" + queueId);
        }
        return queueId != null ? matching.get(0) : matching.get(index % matching.size());
    }

    /** Read (or write) queues of a topic per the name server route, by broker name and queue id. */
    private List<MessageQueue> routeQueues(String topic, boolean write) {
        TopicRouteData r = cluster.route(topic);
        if (r == null || r.getQueueDatas() == null) {
            throw new IllegalArgumentException("no route for topic " + topic);
        }
        List<MessageQueue> out = new ArrayList<>();
        for (QueueData qd : r.getQueueDatas()) {
            int n = write ? qd.getWriteQueueNums() : qd.getReadQueueNums();
            boolean permitted = write ? PermName.isWriteable(qd.getPerm()) : PermName.isReadable(qd.getPerm());
            if (!permitted) {
                continue;
            }
            for (int q = 0; q < n; q++) {
                out.add(new MessageQueue(topic, qd.getBrokerName(), q));
            }
        }
        out.sort(QUEUE_ORDER);
        return out;
    }

    /** The command's {@code tags} (none when it names none). */
    private static List<String> tags(Args a) {
        List<String> tags = new ArrayList<>();
        if (a.has("tags")) {
            for (JsonElement e : a.array("tags")) {
                tags.add(e.getAsString());
            }
        }
        return tags;
    }

    private JsonElement produceBulk(Args a) throws Exception {
        String topic = a.str("topic");
        long count = a.lng("count");
        int bodySize = a.integer("bodySize");
        List<String> tags = tags(a);
        String keyPrefix = a.str("keyPrefix", null);
        DefaultMQProducer producer = clients.producer();
        refreshRoute(producer, topic);
        JsonElement r = BulkLoad.run(producer, routeQueues(topic, true), topic, count, bodySize, tags, keyPrefix);
        cluster.waitDispatched(30_000);
        return r;
    }

    /**
     * {@code count} transactional messages (TransactionalLoad), mode {@code async} or {@code sync}, with a producer
     * of group {@code group} started for the command (not timed) and shut down after it.
     */
    private JsonElement produceTransactional(Args a) throws Exception {
        String topic = a.str("topic");
        long count = a.lng("count");
        int bodySize = a.integer("bodySize");
        List<String> tags = tags(a);
        String keyPrefix = a.str("keyPrefix", null);
        String mode = a.str("mode", "async");
        int concurrency = a.integer("concurrency", 32);
        long timeoutMs = a.lng("timeoutMs", 600_000L);
        String group = a.str("group", "rmq-shim-tx-" + tmpClients.incrementAndGet());
        TransactionMQProducer producer = clients.newTransactionProducer(group, TransactionalLoad.committing());
        try {
            refreshRoute(producer, topic);
            List<MessageQueue> queues = routeQueues(topic, true);
            LongSupplier stored = () -> {
                long held = 0;
                try {
                    for (MessageQueue mq : queues) {
                        held += cluster.runningController(mq.getBrokerName()).getMessageStore()
                            .getMaxOffsetInQueue(topic, mq.getQueueId());
                    }
                } catch (Exception e) {
                    throw new IllegalStateException("reading the max offsets of " + topic, e);
                }
                return held;
            };
            return TransactionalLoad.run(producer, queues, topic, count, bodySize, tags, keyPrefix, mode, concurrency,
                stored, timeoutMs);
        } finally {
            producer.shutdown();
        }
    }

    // ---------------------------------------------------------------- consuming

    @SuppressWarnings("deprecation")
    private JsonElement consume(Args a) throws Exception {
        String topic = a.str("topic");
        String broker = a.str("broker", null);
        Integer queueId = a.integer("queueId", null);
        Long fromOffset = a.lng("fromOffset", null);
        Long toOffset = a.lng("toOffset", null);
        long maxMessages = a.lng("maxMessages", Long.MAX_VALUE);

        cluster.awaitDispatched(DISPATCH_WAIT_MS);
        String namespace = a.str("namespace", null);
        // in a namespace, the route is the wrapped topic's and the consumer wraps the queues it pulls itself
        DefaultMQPullConsumer consumer = clients.consumer(namespace);
        List<MessageQueue> queues = new ArrayList<>();
        String wireTopic = NamespaceUtil.wrapNamespace(namespace, topic);
        TopicRouteData route = cluster.route(wireTopic);
        boolean logic = route != null && route.getTopicQueueMappingByBroker() != null
            && !route.getTopicQueueMappingByBroker().isEmpty();
        // a static topic is read as the Java client reads it, by its logic queues
        for (MessageQueue mq : logic ? consumer.fetchSubscribeMessageQueues(topic) : routeQueues(wireTopic, false)) {
            mq = new MessageQueue(topic, mq.getBrokerName(), mq.getQueueId());
            if ((broker == null || broker.equals(mq.getBrokerName())) && (queueId == null || queueId == mq.getQueueId())) {
                queues.add(mq);
            }
        }
        if (queues.isEmpty() && broker != null && queueId != null) {
            queues.add(new MessageQueue(topic, broker, queueId));
        }
        JsonArray out = new JsonArray();
        for (MessageQueue mq : queues) {
            long from = fromOffset != null ? fromOffset : consumer.minOffset(mq);
            long to = toOffset != null ? toOffset : consumer.maxOffset(mq);
            QueueReader.read(consumer, mq, from, to, maxMessages - out.size(),
                m -> out.add(MessageJson.fromMessageExt(m)));
        }
        return out;
    }

    // ---------------------------------------------------------------- offsets

    private JsonElement offsets(String topic) throws Exception {
        cluster.awaitDispatched(DISPATCH_WAIT_MS);
        TopicStatsTable stats = clients.admin().examineTopicStats(topic);
        Map<MessageQueue, TopicOffset> sorted = new TreeMap<>(QUEUE_ORDER);
        sorted.putAll(stats.getOffsetTable());
        JsonArray out = new JsonArray();
        for (Map.Entry<MessageQueue, TopicOffset> e : sorted.entrySet()) {
            JsonObject o = new JsonObject();
            o.addProperty("brokerName", e.getKey().getBrokerName());
            o.addProperty("queueId", e.getKey().getQueueId());
            o.addProperty("minOffset", e.getValue().getMinOffset());
            o.addProperty("maxOffset", e.getValue().getMaxOffset());
            o.addProperty("lastUpdateTimestamp", e.getValue().getLastUpdateTimestamp());
            out.add(o);
        }
        return out;
    }

    private static MessageQueue queue(Args a) {
        return new MessageQueue(a.str("topic"), a.str("broker"), a.integer("queueId"));
    }

    private JsonElement searchOffset(Args a) throws Exception {
        MessageQueue mq = queue(a);
        long ts = a.lng("timestamp");
        String boundary = a.str("boundary", null);
        DefaultMQAdminExt admin = clients.admin();
        long r;
        if (boundary == null) {
            r = admin.searchOffset(mq, ts);
        } else if (boundary.equalsIgnoreCase("lower")) {
            r = admin.searchLowerBoundaryOffset(mq, ts);
        } else if (boundary.equalsIgnoreCase("upper")) {
            r = admin.searchUpperBoundaryOffset(mq, ts);
        } else {
            throw new IllegalArgumentException("boundary must be lower or upper");
        }
        return new JsonPrimitive(r);
    }

    private JsonElement earliestMsgStoreTime(Args a) throws Exception {
        return new JsonPrimitive(clients.admin().earliestMsgStoreTime(queue(a)));
    }

    /** The committed offset as stored by the broker, or -1 when the group has none for that queue. */
    private JsonElement queryConsumerOffset(Args a) throws Exception {
        String group = a.str("group");
        MessageQueue mq = queue(a);
        QueryConsumerOffsetRequestHeader h = new QueryConsumerOffsetRequestHeader();
        h.setConsumerGroup(group);
        h.setTopic(mq.getTopic());
        h.setQueueId(mq.getQueueId());
        h.setSetZeroIfNotFound(false);
        DefaultMQAdminExt admin = clients.admin();
        try {
            long off = admin.getDefaultMQAdminExtImpl().getMqClientInstance().getMQClientAPIImpl()
                .queryConsumerOffset(cluster.broker(mq.getBrokerName()).address(), h, TIMEOUT_MS);
            return new JsonPrimitive(off);
        } catch (MQBrokerException e) {
            if (e.getResponseCode() == ResponseCode.QUERY_NOT_FOUND) {
                return new JsonPrimitive(-1L);
            }
            throw e;
        }
    }

    /**
     * Writes the group's offset for the queue. The broker refuses offsets of a group it does not know
     * (SUBSCRIPTION_GROUP_NOT_EXIST): the group is then created with default settings and the update repeated.
     */
    private JsonElement updateConsumerOffset(Args a) throws Exception {
        String group = a.str("group");
        MessageQueue mq = queue(a);
        long offset = a.lng("offset");
        String addr = cluster.broker(mq.getBrokerName()).address();
        DefaultMQAdminExt admin = clients.admin();
        try {
            admin.updateConsumeOffset(addr, group, mq, offset);
        } catch (MQBrokerException e) {
            if (e.getResponseCode() != ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST) {
                throw e;
            }
            SubscriptionGroupConfig g = new SubscriptionGroupConfig();
            g.setGroupName(group);
            admin.createAndUpdateSubscriptionGroupConfig(addr, g);
            admin.updateConsumeOffset(addr, group, mq, offset);
        }
        return null;
    }
}
