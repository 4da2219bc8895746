package org.rmqspark.shim;

import com.google.gson.JsonObject;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.impl.producer.DefaultMQProducerImpl;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageAccessor;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.common.sysflag.MessageSysFlag;
import org.apache.rocketmq.remoting.InvokeCallback;
import org.apache.rocketmq.remoting.netty.ResponseFuture;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;
import org.apache.rocketmq.remoting.protocol.RequestCode;
import org.apache.rocketmq.remoting.protocol.ResponseCode;
import org.apache.rocketmq.remoting.protocol.header.EndTransactionRequestHeader;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.LongSupplier;

/**
 * The exactly-once sink's floor for benchmarks.write: {@code count} transactional messages (bodies of BulkLoad), each a
 * half message (SEND_MESSAGE with the prepared flag; the broker takes no half message in a batch:
 * MessageExtEncoder, "batch does not support transaction") committed by one END_TRANSACTION, with the official Java
 * client. Two ways:
 * <ul>
 *   <li>{@code async}: what the broker takes, as close to its limit as the client allows. Message i goes to queue
 *       i % queues as an asynchronous {@code send(msg, mq, callback)} of a prepared message (the properties
 *       {@code sendMessageInTransaction} sets); when its half is stored, its END_TRANSACTION (commit), the request
 *       {@code DefaultMQProducerImpl.endTransaction} builds, is sent two-way on the client's remoting client, and the
 *       transaction ends when the broker answers. {@code inFlight} transactions (half or end) at most. The client's
 *       own {@code endTransaction} sends it one-way: nothing would bound the ends in flight, and a broker that sheds
 *       one (its END_TRANSACTION queue waited too long) drops it without a word.</li>
 *   <li>{@code sync}: the official API, {@link TransactionMQProducer#sendMessageInTransaction}: a synchronous half
 *       send, the local transaction (here: commit), a one-way END_TRANSACTION; from {@code threads} threads at once
 *       (queues chosen by the producer, round robin).</li>
 * </ul>
 * Either way the run ends when the topic's queues hold {@code count} messages (a commit stores the real message),
 * so "seconds" covers every half and every commit. The producer's start is not timed.
 */
final class TransactionalLoad {
    private static final int MAX_BUSY_RETRIES = 50;
    private static final long SEND_TIMEOUT_MS = 30_000;
    /** Halves and commits the broker refused as busy and that were sent again (async mode). */
    private static final AtomicLong BUSY_RETRIES = new AtomicLong();
    private static final ScheduledExecutorService RETRY = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "transactional-load-retry");
        t.setDaemon(true);
        return t;
    });

    private TransactionalLoad() {
    }

    /** A listener whose local transactions commit; a check-back is answered "unknown", so nothing commits twice. */
    static TransactionListener committing() {
        return new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                return LocalTransactionState.COMMIT_MESSAGE;
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                return LocalTransactionState.UNKNOW;
            }
        };
    }

    static JsonObject run(TransactionMQProducer producer, List<MessageQueue> queues, String topic, long count,
        int bodySize, List<String> tags, String keyPrefix, String mode, int concurrency, LongSupplier stored,
        long timeoutMs) throws Exception {
        if (queues.isEmpty()) {
            throw new IllegalStateException("topic " + topic + " has no write queues");
        }
        AtomicReference<Throwable> failure = new AtomicReference<>();
        AtomicLong committed = new AtomicLong();
        long retriesBefore = BUSY_RETRIES.get();
        long start = System.nanoTime();
        if ("async".equals(mode)) {
            runAsync(producer, queues, topic, count, bodySize, tags, keyPrefix, concurrency, failure, committed,
                timeoutMs);
        } else if ("sync".equals(mode)) {
            runSync(producer, topic, count, bodySize, tags, keyPrefix, concurrency, failure, committed, timeoutMs);
        } else {
            throw new IllegalArgumentException("mode must be async or sync, not " + mode);
        }
        if (failure.get() != null) {
            throw new IllegalStateException("transactional load failed after " + committed.get() + " commits",
                failure.get());
        }
        double sentSeconds = (System.nanoTime() - start) / 1e9;
        long deadline = System.currentTimeMillis() + 60_000;
        long held = stored.getAsLong();
        while (held < count && System.currentTimeMillis() < deadline) {
            EmbeddedCluster.sleep(1);
            held = stored.getAsLong();
        }
        double seconds = (System.nanoTime() - start) / 1e9;
        if (held != count) {
            throw new IllegalStateException("the topic holds " + held + " messages after " + count
                + " transactions were committed (a one-way END_TRANSACTION the broker dropped?)");
        }
        JsonObject o = new JsonObject();
        o.addProperty("sent", count);
        o.addProperty("committed", committed.get());
        o.addProperty("seconds", seconds);
        o.addProperty("sentSeconds", sentSeconds);
        o.addProperty("mode", mode);
        o.addProperty("concurrency", concurrency);
        o.addProperty("busyRetries", BUSY_RETRIES.get() - retriesBefore);
        return o;
    }

    /** A prepared message, as sendMessageInTransaction makes one before it sends it. */
    private static Message half(TransactionMQProducer producer, String topic, long i, int bodySize, List<String> tags,
        String keyPrefix) {
        Message m = BulkLoad.message(topic, i, bodySize, tags, keyPrefix);
        MessageAccessor.putProperty(m, MessageConst.PROPERTY_TRANSACTION_PREPARED, "true");
        MessageAccessor.putProperty(m, MessageConst.PROPERTY_PRODUCER_GROUP, producer.getProducerGroup());
        return m;
    }

    private static void runAsync(TransactionMQProducer producer, List<MessageQueue> queues, String topic, long count,
        int bodySize, List<String> tags, String keyPrefix, int inFlight, AtomicReference<Throwable> failure,
        AtomicLong committed, long timeoutMs) throws Exception {
        Semaphore permits = new Semaphore(inFlight);
        int nq = queues.size();
        for (long i = 0; i < count && failure.get() == null; i++) {
            Message m = half(producer, topic, i, bodySize, tags, keyPrefix);
            permits.acquire();
            sendHalf(producer, m, queues.get((int) (i % nq)), 0, permits, failure, committed);
        }
        if (!permits.tryAcquire(inFlight, timeoutMs, TimeUnit.MILLISECONDS)) {
            throw new IllegalStateException("transactions did not end in time (" + committed.get() + " committed)");
        }
        permits.release(inFlight);
    }

    /** One half, asynchronously; when it is stored, its commit. A half refused as busy was not stored: sent again. */
    private static void sendHalf(TransactionMQProducer producer, Message m, MessageQueue mq, int attempt,
        Semaphore permits, AtomicReference<Throwable> failure, AtomicLong committed) throws Exception {
        try {
            producer.send(m, mq, new SendCallback() {
                @Override
                public void onSuccess(SendResult r) {
                    if (r.getSendStatus() != SendStatus.SEND_OK) {
                        failure.compareAndSet(null, new IllegalStateException("half send status " + r.getSendStatus()));
                        permits.release();
                        return;
                    }
                    try {
                        commit(producer, m, r, 0, permits, failure, committed);
                    } catch (Exception e) {
                        failure.compareAndSet(null, e);
                        permits.release();
                    }
                }

                @Override
                public void onException(Throwable e) {
                    if (attempt < MAX_BUSY_RETRIES && e instanceof MQBrokerException
                        && ((MQBrokerException) e).getResponseCode() == ResponseCode.SYSTEM_BUSY) {
                        BUSY_RETRIES.incrementAndGet();
                        RETRY.schedule(() -> {
                            try {
                                sendHalf(producer, m, mq, attempt + 1, permits, failure, committed);
                            } catch (Exception again) {
                                failure.compareAndSet(null, again);
                                permits.release();
                            }
                        }, 50L * (attempt + 1), TimeUnit.MILLISECONDS);
                        return;
                    }
                    failure.compareAndSet(null, e);
                    permits.release();
                }
            }, SEND_TIMEOUT_MS);
        } catch (Exception e) {
            permits.release();
            throw e;
        }
    }

    /**
     * The END_TRANSACTION (commit) that DefaultMQProducerImpl.endTransaction builds for a stored half, sent two-way;
     * the permit is released on the broker's answer. A commit refused as busy was not applied: sent again.
     */
    private static void commit(TransactionMQProducer producer, Message m, SendResult r, int attempt,
        Semaphore permits, AtomicReference<Throwable> failure, AtomicLong committed) throws Exception {
        DefaultMQProducerImpl impl = producer.getDefaultMQProducerImpl();
        String broker = impl.getMqClientFactory().getBrokerNameFromMessageQueue(r.getMessageQueue());
        String address = impl.getMqClientFactory().findBrokerAddressInPublish(broker);
        EndTransactionRequestHeader h = new EndTransactionRequestHeader();
        h.setTopic(m.getTopic());
        h.setTransactionId(r.getTransactionId());
        h.setCommitLogOffset(MessageDecoder.decodeMessageId(
            r.getOffsetMsgId() != null ? r.getOffsetMsgId() : r.getMsgId()).getOffset());
        h.setBrokerName(broker);
        h.setCommitOrRollback(MessageSysFlag.TRANSACTION_COMMIT_TYPE);
        h.setProducerGroup(producer.getProducerGroup());
        h.setTranStateTableOffset(r.getQueueOffset());
        h.setMsgId(r.getMsgId());
        h.setFromTransactionCheck(false);
        RemotingCommand request = RemotingCommand.createRequestCommand(RequestCode.END_TRANSACTION, h);
        impl.getMqClientFactory().getMQClientAPIImpl().getRemotingClient().invokeAsync(address, request,
            SEND_TIMEOUT_MS, new InvokeCallback() {
                @Override
                public void operationComplete(ResponseFuture future) {
                }

                @Override
                public void operationSucceed(RemotingCommand response) {
                    int code = response.getCode();
                    if (code == ResponseCode.SUCCESS) {
                        committed.incrementAndGet();
                        permits.release();
                        return;
                    }
                    if (code == ResponseCode.SYSTEM_BUSY && attempt < MAX_BUSY_RETRIES) {
                        BUSY_RETRIES.incrementAndGet();
                        RETRY.schedule(() -> {
                            try {
                                commit(producer, m, r, attempt + 1, permits, failure, committed);
                            } catch (Exception again) {
                                failure.compareAndSet(null, again);
                                permits.release();
                            }
                        }, 50L * (attempt + 1), TimeUnit.MILLISECONDS);
                        return;
                    }
                    failure.compareAndSet(null, new IllegalStateException(
                        "END_TRANSACTION answered " + code + ": " + response.getRemark()));
                    permits.release();
                }

                @Override
                public void operationFail(Throwable e) {
                    failure.compareAndSet(null, e);
                    permits.release();
                }
            });
    }

    private static void runSync(TransactionMQProducer producer, String topic, long count, int bodySize,
        List<String> tags, String keyPrefix, int threads, AtomicReference<Throwable> failure, AtomicLong committed,
        long timeoutMs) throws Exception {
        AtomicLong next = new AtomicLong();
        ExecutorService pool = Executors.newFixedThreadPool(threads, r -> {
            Thread t = new Thread(r, "transactional-load-sync");
            t.setDaemon(true);
            return t;
        });
        try {
            List<java.util.concurrent.Future<?>> running = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                running.add(pool.submit(() -> {
                    for (long i = next.getAndIncrement(); i < count && failure.get() == null;
                         i = next.getAndIncrement()) {
                        Message m = BulkLoad.message(topic, i, bodySize, tags, keyPrefix);
                        try {
                            TransactionSendResult r = producer.sendMessageInTransaction(m, null);
                            if (r.getSendStatus() != SendStatus.SEND_OK
                                || r.getLocalTransactionState() != LocalTransactionState.COMMIT_MESSAGE) {
                                throw new IllegalStateException("sendMessageInTransaction: " + r.getSendStatus()
                                    + ", " + r.getLocalTransactionState());
                            }
                            committed.incrementAndGet();
                        } catch (Exception e) {
                            failure.compareAndSet(null, e);
                        }
                    }
                }));
            }
            long deadline = System.currentTimeMillis() + timeoutMs;
            for (java.util.concurrent.Future<?> f : running) {
                f.get(Math.max(1, deadline - System.currentTimeMillis()), TimeUnit.MILLISECONDS);
            }
        } finally {
            pool.shutdownNow();
        }
    }
}
