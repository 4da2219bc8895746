package org.rmqspark.gateway;

import apache.rocketmq.v2.GetOffsetRequest;
import apache.rocketmq.v2.GetOffsetResponse;
import apache.rocketmq.v2.QueryOffsetPolicy;
import apache.rocketmq.v2.QueryOffsetRequest;
import apache.rocketmq.v2.QueryOffsetResponse;
import apache.rocketmq.v2.UpdateOffsetRequest;
import apache.rocketmq.v2.UpdateOffsetResponse;
import org.apache.rocketmq.common.BoundaryType;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.protocol.header.QueryConsumerOffsetRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.UpdateConsumerOffsetRequestHeader;

/**
 * QueryOffset (a queue's first offset, end offset, or first offset stored at or after a time), GetOffset and
 * UpdateOffset (a group's committed offset), each one request to the queue's broker: the queries to any member
 * that can read (a slave while the master is away), the update to the master only.
 */
final class OffsetHandler {
    private final BrokerClient client;
    private final BrokerDirectory directory;

    OffsetHandler(BrokerClient client, BrokerDirectory directory) {
        this.client = client;
        this.directory = directory;
    }

    QueryOffsetResponse queryOffset(QueryOffsetRequest req) throws Exception {
        QueueRef q = QueueRef.of(req.hasMessageQueue(), req.getMessageQueue());
        CallerAuth.require().check(Caller.Action.READ, q.topic);
        MessageQueue mq = q.toMessageQueue();
        if (req.getQueryOffsetPolicy() == QueryOffsetPolicy.TIMESTAMP && !req.hasTimestamp()) {
            throw GatewayException.badRequest("timestamp is required with query_offset_policy TIMESTAMP (" + q + ")");
        }
        String addr = directory.readAddress(q);
        long offset = directory.call(addr, () -> {
            switch (req.getQueryOffsetPolicy()) {
                case BEGINNING:
                    return client.api().getMinOffset(addr, mq, client.timeoutMs());
                case END:
                    return client.api().getMaxOffset(addr, mq, client.timeoutMs());
                case TIMESTAMP:
                    return client.api().searchOffset(addr, mq, V2Messages.millis(req.getTimestamp()),
                        BoundaryType.LOWER, client.timeoutMs());
                default:
                    throw GatewayException.badRequest("unknown query_offset_policy " + req.getQueryOffsetPolicyValue()
                        + " (" + q + ")");
            }
        });
        return QueryOffsetResponse.newBuilder().setStatus(Statuses.OK).setOffset(offset).build();
    }

    GetOffsetResponse getOffset(GetOffsetRequest req) throws Exception {
        String group = QueueRef.name(req.hasGroup(), req.getGroup(), "group");
        QueueRef q = QueueRef.of(req.hasMessageQueue(), req.getMessageQueue());
        CallerAuth.require().check(Caller.Action.READ, q.topic);
        String addr = directory.readAddress(q);
        QueryConsumerOffsetRequestHeader h = new QueryConsumerOffsetRequestHeader();
        h.setConsumerGroup(group);
        h.setTopic(q.topic);
        h.setQueueId(q.queueId);
        h.setSetZeroIfNotFound(false);
        h.setBrokerName(q.broker);
        long offset = directory.call(addr, () -> client.api().queryConsumerOffset(addr, h, client.timeoutMs()));
        return GetOffsetResponse.newBuilder().setStatus(Statuses.OK).setOffset(offset).build();
    }

    UpdateOffsetResponse updateOffset(UpdateOffsetRequest req) throws Exception {
        String group = QueueRef.name(req.hasGroup(), req.getGroup(), "group");
        QueueRef q = QueueRef.of(req.hasMessageQueue(), req.getMessageQueue());
        Caller caller = CallerAuth.require();
        caller.check(Caller.Action.READ, q.topic);
        caller.check(Caller.Action.COMMIT, group);
        if (req.getOffset() < 0) {
            throw GatewayException.badRequest("offset must not be negative (" + q + ", group " + group + ")");
        }
        String addr = directory.masterAddress(q);
        UpdateConsumerOffsetRequestHeader h = new UpdateConsumerOffsetRequestHeader();
        h.setConsumerGroup(group);
        h.setTopic(q.topic);
        h.setQueueId(q.queueId);
        h.setCommitOffset(req.getOffset());
        h.setBrokerName(q.broker);
        directory.call(addr, () -> {
            client.api().updateConsumerOffset(addr, h, client.timeoutMs());
            return null;
        });
        return UpdateOffsetResponse.newBuilder().setStatus(Statuses.OK).build();
    }
}
