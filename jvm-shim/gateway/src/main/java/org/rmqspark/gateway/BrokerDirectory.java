package org.rmqspark.gateway;

import apache.rocketmq.v2.Code;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.common.constant.PermName;
import org.apache.rocketmq.remoting.protocol.ResponseCode;
import org.apache.rocketmq.remoting.protocol.body.ClusterInfo;
import org.apache.rocketmq.remoting.protocol.route.BrokerData;
import org.apache.rocketmq.remoting.protocol.route.QueueData;
import org.apache.rocketmq.remoting.protocol.route.TopicRouteData;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

/**
 * Topic routes from the name server and the addresses of a broker group. Routes are kept for a few seconds (pulls
 * are frequent) and fetched again when they are older, when they do not show the broker asked for, or after a
 * broker could not be reached. A broker that was seen before but is no longer registered counts as down (the
 * caller may retry); a broker name never seen is a bad request.
 *
 * <p>Reads go to the member the broker last suggested for the queue, else the master, else a slave (as the Java
 * client's PullAPIWrapper picks), skipping a member that could not be reached in the last few seconds; writes
 * (offset updates, sends) go to the master only, never to a slave acting for it.
 */
final class BrokerDirectory {
    private static final long ROUTE_TTL_NANOS = TimeUnit.SECONDS.toNanos(3);
    private static final long FAILED_COOLDOWN_NANOS = TimeUnit.SECONDS.toNanos(2);
    /** While no name server answers, the last route is used and the name servers asked again this often. */
    private static final long ROUTE_RETRY_NANOS = TimeUnit.SECONDS.toNanos(1);

    private static final class Cached {
        final TopicRouteData route;
        final long fetchedAt;

        Cached(TopicRouteData route, long fetchedAt) {
            this.route = route;
            this.fetchedAt = fetchedAt;
        }
    }

    private final BrokerClient client;
    private final Map<String, Cached> routes = new ConcurrentHashMap<>();
    /** Every topic that ever had a route. */
    private final java.util.Set<String> seenTopics = ConcurrentHashMap.newKeySet();
    /** Every broker name ever seen in a route, with its last master address. */
    private final Map<String, String> seenBrokers = new ConcurrentHashMap<>();
    /** The broker id each queue's broker last suggested for its next pull, by QueueRef#toString. */
    private final Map<String, Long> suggested = new ConcurrentHashMap<>();
    /** Addresses that could not be reached, with when (System.nanoTime). */
    private final Map<String, Long> failedAt = new ConcurrentHashMap<>();

    BrokerDirectory(BrokerClient client) {
        this.client = client;
    }

    /** The topic's route, fresh from the name server; TOPIC_NOT_FOUND when the name server does not know it. */
    private TopicRouteData fetchRoute(String topic) throws Exception {
        TopicRouteData r;
        try {
            r = client.api().getTopicRouteInfoFromNameServer(topic, client.timeoutMs(), false);
        } catch (MQClientException e) {
            if (e.getResponseCode() == ResponseCode.TOPIC_NOT_EXIST) {
                routes.remove(topic);
                throw new GatewayException(Code.TOPIC_NOT_FOUND, "topic " + topic + " is not known to the name server");
            }
            throw e;
        }
        if (r.getTopicQueueMappingByBroker() != null && !r.getTopicQueueMappingByBroker().isEmpty()) {
            // its queue ids and offsets are logic ones, served across brokers: not what this gateway's calls name
            throw GatewayException.badRequest("topic " + topic + " is a static topic (RocketMQ 5 logic queues), "
                + "which this gateway does not serve: read it over the remoting protocol (option nameServer)");
        }
        routes.put(topic, new Cached(r, System.nanoTime()));
        seenTopics.add(topic);
        if (r.getBrokerDatas() != null) {
            for (BrokerData bd : r.getBrokerDatas()) {
                if (bd.getBrokerAddrs() != null && !bd.getBrokerAddrs().isEmpty()) {
                    seenBrokers.put(bd.getBrokerName(), bd.getBrokerAddrs().values().iterator().next());
                }
            }
        }
        return r;
    }

    /**
     * The topic's route: the cached one while it is fresh (unless {@code refresh}), else fetched. While no name
     * server answers, the last route is used (brokers that are up stay readable); TOPIC_NOT_FOUND when the name
     * servers do not know the topic.
     */
    TopicRouteData route(String topic, boolean refresh) throws Exception {
        Cached c = routes.get(topic);
        if (c != null && !refresh && System.nanoTime() - c.fetchedAt <= ROUTE_TTL_NANOS) {
            return c.route;
        }
        try {
            return fetchRoute(topic);
        } catch (Exception e) {
            if (c == null || !Statuses.unreachable(e)) {
                throw e;
            }
            routes.put(topic, new Cached(c.route, System.nanoTime() - ROUTE_TTL_NANOS + ROUTE_RETRY_NANOS));
            return c.route;
        }
    }

    /** A broker of the topic could not be reached: the next call fetches its route again. */
    void invalidate(String topic) {
        Cached c = routes.get(topic);
        if (c != null) {
            routes.put(topic, new Cached(c.route, 0L));
        }
    }

    /** Remember the broker id the broker suggested for the next pull of a queue. */
    void suggest(QueueRef q, long brokerId) {
        suggested.put(q.toString(), brokerId);
    }

    /** A member of a broker group could not be reached: prefer the others for a few seconds. */
    void markFailed(String address) {
        failedAt.put(address, System.nanoTime());
    }

    /** Note a failed request to {@code address}: an unreachable member is avoided for a few seconds. */
    void onFailure(String address, Throwable t) {
        if (Statuses.unreachable(t)) {
            markFailed(address);
        }
    }

    /** A request to one broker; its failure is noted (see {@link #onFailure}) and rethrown. */
    <T> T call(String address, Callable<T> request) throws Exception {
        try {
            return request.call();
        } catch (Exception e) {
            onFailure(address, e);
            throw e;
        }
    }

    /** The address to read {@code q} from: the suggested member, else the master, else a slave. */
    String readAddress(QueueRef q) throws Exception {
        Map<Long, String> members = members(q);
        long preferred = suggested.getOrDefault(q.toString(), MixAll.MASTER_ID);
        List<Long> ids = new ArrayList<>(members.keySet());
        ids.sort(Comparator.comparing((Long id) -> id != preferred).thenComparing(id -> id != MixAll.MASTER_ID)
            .thenComparing(id -> id));
        for (Long id : ids) {
            Long failed = failedAt.get(members.get(id));
            if (failed == null || System.nanoTime() - failed > FAILED_COOLDOWN_NANOS) {
                return members.get(id);
            }
        }
        return members.get(ids.get(0));
    }

    /** Attribute {@code name} of the topic on the broker at {@code address} (RocketMQ 5 topic attributes), or null. */
    String topicAttribute(String address, String topic, String name) throws Exception {
        Map<String, String> attributes = client.api().getTopicConfig(address, topic, client.timeoutMs())
            .getAttributes();
        return attributes == null ? null : attributes.get(name);
    }

    /**
     * The master address of {@code q}'s broker; PROXY_TIMEOUT while the group has no master (slaves only read), a
     * slave acting for it included (see {@link #actingMaster}).
     */
    String masterAddress(QueueRef q) throws Exception {
        String master = members(q).get(MixAll.MASTER_ID);
        if (master == null || actingMaster(route(q.topic, false), q.broker)) {
            throw new GatewayException(Code.PROXY_TIMEOUT, "broker " + q.broker + " has no master in the route of topic "
                + q.topic + " now (its slaves serve reads only); try again when the master is back");
        }
        return master;
    }

    /**
     * The addresses by broker id of {@code q}'s broker group. Checks that the topic has that queue on that broker
     * (queue ids below max(read, write) queue numbers, as QueryRoute lists them).
     */
    private Map<Long, String> members(QueueRef q) throws Exception {
        try {
            Map<Long, String> members = lookup(route(q.topic, false), q.topic, q.broker, q.queueId);
            if (members == null) {
                members = lookup(route(q.topic, true), q.topic, q.broker, q.queueId);
            }
            if (members != null) {
                return members;
            }
        } catch (GatewayException e) {
            if (e.code() == Code.TOPIC_NOT_FOUND && seenTopics.contains(q.topic)) {
                // the topic had a route: its brokers are all down or restarting
                throw new GatewayException(Code.PROXY_TIMEOUT, "topic " + q.topic + " has no route now: its brokers "
                    + "are down or restarting (" + q + ")");
            }
            throw e;
        }
        throw brokerMissing(q.topic, q.broker);
    }

    /** The group's addresses, null when the route does not show the broker; BAD_REQUEST for a queue id out of range. */
    private static Map<Long, String> lookup(TopicRouteData route, String topic, String brokerName, int queueId) {
        QueueData qd = queueData(route, brokerName);
        Map<Long, String> members = membersOf(route, brokerName);
        if (qd == null || members == null || members.isEmpty()) {
            return null;
        }
        int queues = Math.max(qd.getReadQueueNums(), qd.getWriteQueueNums());
        if (queueId < 0 || queueId >= queues) {
            throw GatewayException.badRequest("queue id " + queueId + " is out of range for topic " + topic
                + " on broker " + brokerName + " (" + queues + " queues)");
        }
        return members;
    }

    private GatewayException brokerMissing(String topic, String brokerName) throws Exception {
        if (registered(brokerName)) {
            return GatewayException.badRequest("topic " + topic + " has no queues on broker " + brokerName);
        }
        if (seenBrokers.containsKey(brokerName)) {
            return new GatewayException(Code.PROXY_TIMEOUT, "broker " + brokerName + " (last at "
                + seenBrokers.get(brokerName) + ") is not in the route of topic " + topic + ": down, restarting or "
                + "unreachable");
        }
        return GatewayException.badRequest("unknown broker name " + brokerName + " for topic " + topic);
    }

    private boolean registered(String brokerName) throws Exception {
        ClusterInfo info = client.api().getBrokerClusterInfo(client.timeoutMs());
        BrokerData bd = info.getBrokerAddrTable() == null ? null : info.getBrokerAddrTable().get(brokerName);
        return bd != null && bd.getBrokerAddrs() != null && !bd.getBrokerAddrs().isEmpty();
    }

    /**
     * Whether the route lists a slave at {@code brokerName}'s brokerId 0 in its master's place: in slave-acting-master
     * mode the name server does so while the master is away, for a group whose brokers enableActingMaster, and takes
     * the write permission off the group's queue data (RouteInfoManager). A read-only topic of such a group looks
     * the same.
     */
    static boolean actingMaster(TopicRouteData route, String brokerName) {
        QueueData qd = queueData(route, brokerName);
        if (qd == null || PermName.isWriteable(qd.getPerm()) || route.getBrokerDatas() == null) {
            return false;
        }
        for (BrokerData bd : route.getBrokerDatas()) {
            if (brokerName.equals(bd.getBrokerName())) {
                return bd.isEnableActingMaster();
            }
        }
        return false;
    }

    static QueueData queueData(TopicRouteData route, String brokerName) {
        if (route.getQueueDatas() == null) {
            return null;
        }
        for (QueueData qd : route.getQueueDatas()) {
            if (brokerName.equals(qd.getBrokerName())) {
                return qd;
            }
        }
        return null;
    }

    static Map<Long, String> membersOf(TopicRouteData route, String brokerName) {
        if (route.getBrokerDatas() == null) {
            return null;
        }
        for (BrokerData bd : route.getBrokerDatas()) {
            if (brokerName.equals(bd.getBrokerName())) {
                return bd.getBrokerAddrs();
            }
        }
        return null;
    }
}
