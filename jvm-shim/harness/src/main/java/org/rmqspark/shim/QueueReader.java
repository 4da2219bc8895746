package org.rmqspark.shim;

import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

import java.util.function.Consumer;

/** Reads a queue's offset range with the official Java pull consumer, as its users do. */
final class QueueReader {
    private static final long TIMEOUT_MS = 10_000;

    private QueueReader() {
    }

    /**
     * Hands each message of {@code [from, to)} of {@code mq} to {@code out}, at most {@code max} of them; returns the
     * offset reached: {@code to}, or less when the broker had nothing more to give (NO_NEW_MSG at the end, or an
     * offset it cannot move past) or {@code max} was reached.
     */
    @SuppressWarnings("deprecation")
    static long read(DefaultMQPullConsumer consumer, MessageQueue mq, long from, long to, long max,
                     Consumer<MessageExt> out) throws Exception {
        long offset = from;
        long taken = 0;
        while (offset < to && taken < max) {
            int want = (int) Math.min(32, Math.min(to - offset, max - taken));
            PullResult pr = consumer.pull(mq, "*", offset, want, TIMEOUT_MS);
            long next = pr.getNextBeginOffset();
            if (pr.getMsgFoundList() != null) {
                for (MessageExt m : pr.getMsgFoundList()) {
                    if (m.getQueueOffset() < offset || m.getQueueOffset() >= to || taken >= max) {
                        continue;
                    }
                    out.accept(m);
                    taken++;
                }
            }
            if (next <= offset) {
                break;
            }
            offset = next;
        }
        return offset;
    }
}
