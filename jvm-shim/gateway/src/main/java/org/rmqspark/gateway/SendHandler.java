package org.rmqspark.gateway;

import apache.rocketmq.v2.Code;
import apache.rocketmq.v2.SendMessageRequest;
import apache.rocketmq.v2.SendMessageResponse;
import apache.rocketmq.v2.SendResultEntry;
import apache.rocketmq.v2.Status;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageClientIDSetter;
import org.apache.rocketmq.common.message.MessageQueue;

import java.util.ArrayList;
import java.util.List;

/**
 * SendMessage through the official producer. With the {@code x-mq-broker-name} metadata the messages go to queue
 * {@code system_properties.queue_id} of that broker, else to a queue the producer picks; several messages go as
 * one batch (so they land in one queue, in order). One entry per message: its id and queue offset.
 */
final class SendHandler {
    private final BrokerClient client;
    private final BrokerDirectory directory;
    /** The most a body may decompress to. */
    private final int maxMessageBytes;

    SendHandler(BrokerClient client, BrokerDirectory directory, int maxMessageBytes) {
        this.client = client;
        this.directory = directory;
        this.maxMessageBytes = maxMessageBytes;
    }

    SendMessageResponse send(SendMessageRequest req) throws Exception {
        if (req.getMessagesCount() == 0) {
            throw GatewayException.badRequest("messages is empty: nothing to send");
        }
        String topic = QueueRef.name(req.getMessages(0).hasTopic(), req.getMessages(0).getTopic(), "messages[0].topic");
        CallerAuth.require().check(Caller.Action.WRITE, topic);
        List<Message> msgs = new ArrayList<>(req.getMessagesCount());
        for (int i = 0; i < req.getMessagesCount(); i++) {
            apache.rocketmq.v2.Message m = req.getMessages(i);
            String t = QueueRef.name(m.hasTopic(), m.getTopic(), "messages[" + i + "].topic");
            if (!t.equals(topic)) {
                throw GatewayException.badRequest("all messages of one SendMessage must have the same topic: messages["
                    + i + "] is for " + t + ", messages[0] for " + topic);
            }
            msgs.add(V2Messages.toSend(m, topic, maxMessageBytes));
        }
        MessageQueue target = target(req, topic);
        DefaultMQProducer producer = client.producer();
        long timeout = client.timeoutMs();
        SendResult r;
        if (msgs.size() == 1) {
            r = target == null ? producer.send(msgs.get(0), timeout) : producer.send(msgs.get(0), target, timeout);
        } else {
            r = target == null ? producer.send(msgs, timeout) : producer.send(msgs, target, timeout);
        }
        return response(r, msgs);
    }

    /** The queue named by x-mq-broker-name and the messages' queue_id, checked against the route; null if none. */
    private MessageQueue target(SendMessageRequest req, String topic) throws Exception {
        String broker = CallMetadata.brokerName();
        if (broker == null) {
            return null;
        }
        int queueId = req.getMessages(0).getSystemProperties().getQueueId();
        for (int i = 1; i < req.getMessagesCount(); i++) {
            if (req.getMessages(i).getSystemProperties().getQueueId() != queueId) {
                throw GatewayException.badRequest("messages of one SendMessage to broker " + broker
                    + " must name the same queue_id: messages[" + i + "] names "
                    + req.getMessages(i).getSystemProperties().getQueueId() + ", messages[0] " + queueId);
            }
        }
        directory.masterAddress(QueueRef.at(topic, broker, queueId));
        return new MessageQueue(topic, broker, queueId);
    }

    private static SendMessageResponse response(SendResult r, List<Message> msgs) {
        Status status = status(r);
        // the producer gave each message its UNIQ_KEY (kept when the caller set one); a batch's queue offsets
        // are consecutive from the first
        String[] joined = r.getMsgId() == null ? new String[0] : r.getMsgId().split(",");
        SendMessageResponse.Builder b = SendMessageResponse.newBuilder().setStatus(status);
        for (int i = 0; i < msgs.size(); i++) {
            SendResultEntry.Builder e = SendResultEntry.newBuilder().setStatus(status)
                .setOffset(r.getQueueOffset() + i);
            String id = MessageClientIDSetter.getUniqID(msgs.get(i));
            if (id == null && i < joined.length) {
                id = joined[i];
            }
            if (id != null) {
                e.setMessageId(id);
            }
            b.addEntries(e);
        }
        return b.build();
    }

    /** SEND_OK is OK; the other send statuses say the message is stored but not as durably as configured. */
    private static Status status(SendResult r) {
        String where = r.getMessageQueue() == null ? "" : " (" + r.getMessageQueue().getBrokerName() + " queue "
            + r.getMessageQueue().getQueueId() + ")";
        switch (r.getSendStatus()) {
            case SEND_OK:
                return Statuses.OK;
            case FLUSH_DISK_TIMEOUT:
                return Statuses.of(Code.MASTER_PERSISTENCE_TIMEOUT, "stored, but the flush to disk timed out" + where);
            case FLUSH_SLAVE_TIMEOUT:
                return Statuses.of(Code.SLAVE_PERSISTENCE_TIMEOUT, "stored, but the replication timed out" + where);
            case SLAVE_NOT_AVAILABLE:
                return Statuses.of(Code.HA_NOT_AVAILABLE, "stored, but no replica is available" + where);
            default:
                return Statuses.of(Code.INTERNAL_SERVER_ERROR, "send status " + r.getSendStatus() + where);
        }
    }
}
