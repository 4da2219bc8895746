package org.rmqspark.shim;

import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.common.message.MessageQueue;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

/**
 * Prints every message of the given topics, read with the official Java pull consumer through any cluster's name
 * server, one JSON object a line (the consume command's form): for tests of RocketMQ run as separate stock processes
 * ({@code tests/support/stock_cluster.py}). A queue whose end is not reached is an error (exit 1), never a short read.
 *
 * <p>usage: {@code java -cp rmq-shim.jar org.rmqspark.shim.ReadTopic NAME_SERVER TOPIC...}
 */
public final class ReadTopic {
    private ReadTopic() {
    }

    @SuppressWarnings("deprecation")
    public static void main(String[] args) {
        if (args.length < 2) {
            System.err.println("usage: ReadTopic NAME_SERVER TOPIC...");
            System.exit(2);
        }
        DefaultMQPullConsumer consumer = new DefaultMQPullConsumer("rmq-shim-read-topic");
        consumer.setNamesrvAddr(args[0]);
        consumer.setInstanceName("rmq-shim-read-topic-" + ProcessHandle.current().pid());
        consumer.setVipChannelEnabled(false);
        int code = 0;
        try {
            consumer.start();
            for (int i = 1; i < args.length; i++) {
                List<MessageQueue> queues = new ArrayList<>(consumer.fetchSubscribeMessageQueues(args[i]));
                queues.sort(Comparator.comparing(MessageQueue::getBrokerName).thenComparingInt(MessageQueue::getQueueId));
                for (MessageQueue mq : queues) {
                    long end = consumer.maxOffset(mq);
                    long reached = QueueReader.read(consumer, mq, consumer.minOffset(mq), end, Long.MAX_VALUE,
                        m -> System.out.println(Protocol.GSON.toJson(MessageJson.fromMessageExt(m))));
                    if (reached < end) {
                        throw new IllegalStateException("queue " + mq + " was read to offset " + reached
                            + " only, short of its end " + end);
                    }
                }
            }
        } catch (Throwable t) {
            System.err.println("rmq-shim ReadTopic: " + Protocol.describe(t));
            t.printStackTrace(System.err);
            code = 1;
        } finally {
            consumer.shutdown();
        }
        System.out.flush();
        System.exit(code);
    }
}
