package org.rmqspark.gateway;

import apache.rocketmq.v2.Address;
import apache.rocketmq.v2.AddressScheme;
import apache.rocketmq.v2.Broker;
import apache.rocketmq.v2.Endpoints;
import apache.rocketmq.v2.MessageQueue;
import apache.rocketmq.v2.MessageType;
import apache.rocketmq.v2.Permission;
import apache.rocketmq.v2.QueryRouteRequest;
import apache.rocketmq.v2.QueryRouteResponse;
import apache.rocketmq.v2.Resource;
import org.apache.rocketmq.common.constant.PermName;
import org.apache.rocketmq.remoting.protocol.route.BrokerData;
import org.apache.rocketmq.remoting.protocol.route.QueueData;
import org.apache.rocketmq.remoting.protocol.route.TopicRouteData;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.function.Supplier;

/**
 * QueryRoute: one MessageQueue per queue id below max(readQueueNums, writeQueueNums) of each broker, whose broker
 * endpoints are the gateway itself (every call goes through it).
 */
final class RouteHandler {
    private final BrokerDirectory directory;
    /** The configured advertised address, or null. */
    private final HostPort advertise;
    /** The gateway's listen address, the last resort for the endpoints. */
    private final Supplier<HostPort> listen;

    RouteHandler(BrokerDirectory directory, HostPort advertise, Supplier<HostPort> listen) {
        this.directory = directory;
        this.advertise = advertise;
        this.listen = listen;
    }

    QueryRouteResponse queryRoute(QueryRouteRequest req) throws Exception {
        String topic = QueueRef.name(req.hasTopic(), req.getTopic(), "topic");
        CallerAuth.require().checkAny(topic);
        TopicRouteData route = directory.route(topic, true);
        Endpoints endpoints = endpoints(req);
        List<QueueData> qds = new ArrayList<>(route.getQueueDatas() == null ? List.of() : route.getQueueDatas());
        qds.sort(Comparator.comparing(QueueData::getBrokerName));
        QueryRouteResponse.Builder out = QueryRouteResponse.newBuilder().setStatus(Statuses.OK);
        Resource topicResource = Resource.newBuilder().setName(CallMetadata.unwrap(topic)).build();
        List<MessageType> accepted = acceptedTypes(topic, route);
        for (QueueData qd : qds) {
            Broker broker = Broker.newBuilder().setName(qd.getBrokerName()).setId(0).setEndpoints(endpoints).build();
            int queues = Math.max(qd.getReadQueueNums(), qd.getWriteQueueNums());
            for (int id = 0; id < queues; id++) {
                boolean read = PermName.isReadable(qd.getPerm()) && id < qd.getReadQueueNums();
                boolean write = PermName.isWriteable(qd.getPerm()) && id < qd.getWriteQueueNums();
                out.addMessageQueues(MessageQueue.newBuilder().setTopic(topicResource).setId(id)
                    .setPermission(permission(read, write)).setBroker(broker).addAllAcceptMessageTypes(accepted));
            }
        }
        return out.build();
    }

    /**
     * The message types the topic takes, from its attribute message.type as the proxy reports them (MIXED: all
     * four); none when the topic has no such attribute or no master answers, since the brokers behind this gateway
     * check no message type.
     */
    private List<MessageType> acceptedTypes(String topic, TopicRouteData route) {
        for (BrokerData bd : route.getBrokerDatas() == null ? List.<BrokerData>of() : route.getBrokerDatas()) {
            String master = bd.getBrokerAddrs() == null ? null : bd.getBrokerAddrs().get(0L);
            if (master == null) {
                continue;
            }
            try {
                String type = directory.topicAttribute(master, topic, "message.type");
                if (type == null) {
                    return List.of();
                }
                if ("MIXED".equals(type)) {
                    return List.of(MessageType.NORMAL, MessageType.FIFO, MessageType.DELAY, MessageType.TRANSACTION);
                }
                return List.of(MessageType.valueOf(type));
            } catch (IllegalArgumentException e) {
                return List.of(); // UNSPECIFIED or a type this gateway does not know
            } catch (Exception e) {
                // this master cannot tell now: ask the next
            }
        }
        return List.of();
    }

    private static Permission permission(boolean read, boolean write) {
        if (read && write) {
            return Permission.READ_WRITE;
        }
        return read ? Permission.READ : write ? Permission.WRITE : Permission.NONE;
    }

    /** The advertised address; else the endpoints the caller says it used; else the listen address. */
    private Endpoints endpoints(QueryRouteRequest req) {
        if (advertise != null) {
            return endpoints(advertise);
        }
        if (req.hasEndpoints() && req.getEndpoints().getAddressesCount() > 0) {
            return req.getEndpoints();
        }
        return endpoints(listen.get());
    }

    static Endpoints endpoints(HostPort hp) {
        AddressScheme scheme = !hp.isIp() ? AddressScheme.DOMAIN_NAME
            : hp.isIpv6() ? AddressScheme.IPv6 : AddressScheme.IPv4;
        return Endpoints.newBuilder().setScheme(scheme)
            .addAddresses(Address.newBuilder().setHost(hp.host).setPort(hp.port)).build();
    }
}
