package org.rmqspark.shim.gateway;

import apache.rocketmq.v2.Code;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.remoting.protocol.ResponseCode;
import org.apache.rocketmq.remoting.protocol.body.ClusterInfo;
import org.apache.rocketmq.remoting.protocol.route.BrokerData;
import org.apache.rocketmq.remoting.protocol.route.QueueData;
import org.apache.rocketmq.remoting.protocol.route.TopicRouteData;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

/**
 * Topic routes from the name server and the master address of a broker. Routes are kept for a few seconds (pulls
 * are frequent) and fetched again when they are older, when they do not show the broker asked for, or after a
 * broker could not be reached. A broker that was seen before but is no longer registered counts as down (the
 * caller may retry); a broker name never seen is a bad request.
 */
final class BrokerDirectory {
    private static final long ROUTE_TTL_NANOS = TimeUnit.SECONDS.toNanos(3);

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
    /** Every broker name ever seen in a route, with its last master address. */
    private final Map<String, String> seenBrokers = new ConcurrentHashMap<>();

    BrokerDirectory(BrokerClient client) {
        this.client = client;
    }

    /** The topic's route, fresh from the name server; TOPIC_NOT_FOUND when the name server does not know it. */
    TopicRouteData fetchRoute(String topic) throws Exception {
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
        routes.put(topic, new Cached(r, System.nanoTime()));
        if (r.getBrokerDatas() != null) {
            for (BrokerData bd : r.getBrokerDatas()) {
                String master = bd.getBrokerAddrs() == null ? null : bd.getBrokerAddrs().get(MixAll.MASTER_ID);
                if (master != null) {
                    seenBrokers.put(bd.getBrokerName(), master);
                }
            }
        }
        return r;
    }

    /** Forget the topic's route (a broker of it could not be reached): the next call fetches it again. */
    void invalidate(String topic) {
        routes.remove(topic);
    }

    /**
     * The master address of {@code brokerName} for a request on queue {@code queueId} of {@code topic}. Checks that
     * the topic has that queue on that broker (queue ids below max(read, write) queue numbers, as QueryRoute lists
     * them).
     */
    String masterAddress(String topic, String brokerName, int queueId) throws Exception {
        Cached c = routes.get(topic);
        boolean fresh = c == null || System.nanoTime() - c.fetchedAt > ROUTE_TTL_NANOS;
        TopicRouteData route = fresh ? fetchRoute(topic) : c.route;
        String addr = lookup(route, topic, brokerName, queueId);
        if (addr == null && !fresh) {
            addr = lookup(fetchRoute(topic), topic, brokerName, queueId);
        }
        if (addr != null) {
            return addr;
        }
        throw brokerMissing(topic, brokerName);
    }

    /** The address, null when the route does not show the broker; BAD_REQUEST for a queue id out of range. */
    private String lookup(TopicRouteData route, String topic, String brokerName, int queueId) {
        QueueData qd = queueData(route, brokerName);
        String master = masterOf(route, brokerName);
        if (qd == null || master == null) {
            return null;
        }
        int queues = Math.max(qd.getReadQueueNums(), qd.getWriteQueueNums());
        if (queueId < 0 || queueId >= queues) {
            throw GatewayException.badRequest("queue id " + queueId + " is out of range for topic " + topic
                + " on broker " + brokerName + " (" + queues + " queues)");
        }
        return master;
    }

    private GatewayException brokerMissing(String topic, String brokerName) throws Exception {
        if (registered(brokerName)) {
            return GatewayException.badRequest("topic " + topic + " has no queues on broker " + brokerName);
        }
        if (seenBrokers.containsKey(brokerName)) {
            return new GatewayException(Code.PROXY_TIMEOUT, "broker " + brokerName + " (last at "
                + seenBrokers.get(brokerName) + ") is not registered with the name server: down or unreachable");
        }
        return GatewayException.badRequest("unknown broker name " + brokerName + " for topic " + topic);
    }

    private boolean registered(String brokerName) throws Exception {
        ClusterInfo info = client.api().getBrokerClusterInfo(client.timeoutMs());
        BrokerData bd = info.getBrokerAddrTable() == null ? null : info.getBrokerAddrTable().get(brokerName);
        return bd != null && bd.getBrokerAddrs() != null && bd.getBrokerAddrs().get(MixAll.MASTER_ID) != null;
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

    static String masterOf(TopicRouteData route, String brokerName) {
        if (route.getBrokerDatas() == null) {
            return null;
        }
        for (BrokerData bd : route.getBrokerDatas()) {
            if (brokerName.equals(bd.getBrokerName())) {
                return bd.getBrokerAddrs() == null ? null : bd.getBrokerAddrs().get(MixAll.MASTER_ID);
            }
        }
        return null;
    }
}
