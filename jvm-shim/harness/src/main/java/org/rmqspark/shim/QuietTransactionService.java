package org.rmqspark.shim;

import org.apache.rocketmq.broker.BrokerController;
import org.apache.rocketmq.broker.transaction.TransactionalMessageService;
import org.apache.rocketmq.broker.transaction.queue.MessageQueueOpContext;
import org.apache.rocketmq.broker.transaction.queue.TransactionalMessageBridge;
import org.apache.rocketmq.broker.transaction.queue.TransactionalMessageServiceImpl;
import org.apache.rocketmq.common.BrokerConfig;

/**
 * RocketMQ's transactional message service with one fix: its op batch thread no longer spins once transactions
 * stop.
 *
 * <p>In 5.5.0 and 5.5.1, {@code TransactionalMessageServiceImpl.batchSendOpMessage} (which writes the records of
 * ended half messages in batches and answers when to run next) takes the last write time of every op queue into its
 * next wake-up, idle queues included (5.4.0 counts only the queues it just wrote to). Once a broker has ended
 * transactions and then ends none for {@code transactionOpBatchInterval} (3 s), an idle queue's old write time puts
 * the wake-up in the past, and the thread runs again at once, a whole core per broker, until the next
 * END_TRANSACTION. After every exactly-once test, or a driver killed inside a commit, two brokers took both cores of
 * a test machine and starved Spark's drivers (a Python worker that does not connect back within 10 s fails a query).
 *
 * <p>This service writes the same op messages at the same moments (the batching is the broker's own); it only
 * answers the next wake-up without the idle queues: at once while a queue holds more than one op message's worth,
 * else when the first non-empty queue's interval ends, else one interval from now.
 */
final class QuietTransactionService extends TransactionalMessageServiceImpl {
    private final BrokerConfig config;

    private QuietTransactionService(BrokerController broker) {
        super(new TransactionalMessageBridge(broker, broker.getMessageStore()));
        this.config = broker.getBrokerConfig();
    }

    /** Replaces the service that {@code BrokerController.initialize()} made (and stops its op batch thread). */
    static void install(BrokerController broker) {
        TransactionalMessageService made = broker.getTransactionalMessageService();
        if (made != null) {
            made.close();
        }
        broker.setTransactionalMessageService(new QuietTransactionService(broker));
    }

    @Override
    public long batchSendOpMessage() {
        long next = super.batchSendOpMessage();
        long now = System.currentTimeMillis();
        if (next > now) {
            return next;
        }
        long interval = config.getTransactionOpBatchInterval();
        int maxSize = config.getTransactionOpMsgMaxSize();
        long wake = now + interval;
        for (MessageQueueOpContext queue : getDeleteContext().values()) {
            int size = queue.getTotalSize().get();
            if (size <= 0 || queue.getContextQueue().isEmpty()) {
                continue; // idle: nothing to write, however long ago it last wrote
            }
            if (size >= maxSize) {
                return 0L;
            }
            wake = Math.min(wake, Math.max(now, queue.getLastWriteTimestamp() + interval));
        }
        return wake;
    }
}
