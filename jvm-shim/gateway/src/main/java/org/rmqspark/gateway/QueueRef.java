package org.rmqspark.gateway;

import apache.rocketmq.v2.MessageQueue;
import apache.rocketmq.v2.Resource;

/** A validated (topic, broker name, queue id) from a request, with the group when the method has one. */
final class QueueRef {
    final String topic;
    final String broker;
    final int queueId;

    private QueueRef(String topic, String broker, int queueId) {
        this.topic = topic;
        this.broker = broker;
        this.queueId = queueId;
    }

    /** A queue named by the gateway itself (already validated). */
    static QueueRef at(String topic, String broker, int queueId) {
        return new QueueRef(topic, broker, queueId);
    }

    /** From a request's {@code message_queue}: topic, broker name and a non-negative id are required. */
    static QueueRef of(boolean present, MessageQueue mq) {
        if (!present) {
            throw GatewayException.badRequest("message_queue is required");
        }
        String topic = name(mq.hasTopic(), mq.getTopic(), "message_queue.topic");
        if (!mq.hasBroker() || mq.getBroker().getName().isBlank()) {
            throw GatewayException.badRequest("message_queue.broker.name is required (topic " + topic + ")");
        }
        if (mq.getId() < 0) {
            throw GatewayException.badRequest("message_queue.id must not be negative (topic " + topic + ", got "
                + mq.getId() + ")");
        }
        return new QueueRef(topic, mq.getBroker().getName(), mq.getId());
    }

    /**
     * The name of a required resource (topic, group) as the brokers know it (in the call's namespace), else
     * BAD_REQUEST naming the field.
     */
    static String name(boolean present, Resource r, String field) {
        if (!present || r.getName().isBlank()) {
            throw GatewayException.badRequest(field + " is required");
        }
        return CallMetadata.wrap(r.getName());
    }

    org.apache.rocketmq.common.message.MessageQueue toMessageQueue() {
        return new org.apache.rocketmq.common.message.MessageQueue(topic, broker, queueId);
    }

    @Override
    public String toString() {
        return "topic " + topic + ", " + broker + " queue " + queueId;
    }
}
