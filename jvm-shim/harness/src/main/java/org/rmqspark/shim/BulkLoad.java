package org.rmqspark.shim;

import com.google.gson.JsonObject;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageQueue;

import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.remoting.protocol.ResponseCode;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Load generator for benchmarks: {@code count} messages of {@code bodySize} bytes, message i to write queue
 * i % queues, sent as asynchronous batches (up to 64 messages per batch and queue) with a bounded number in flight.
 */
final class BulkLoad {
    private static final int BATCH = 64;
    private static final int MAX_BATCH_BYTES = 3 * 1024 * 1024; // broker and client limit is 4 MiB per request
    private static final int IN_FLIGHT = 8;
    private static final int MAX_BUSY_RETRIES = 50;
    private static final ScheduledExecutorService RETRY = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "bulk-load-retry");
        t.setDaemon(true);
        return t;
    });

    private BulkLoad() {
    }

    static JsonObject run(DefaultMQProducer producer, List<MessageQueue> queues, String topic, long count,
        int bodySize, List<String> tags, String keyPrefix) throws Exception {
        if (queues.isEmpty()) {
            throw new IllegalStateException("topic " + topic + " has no write queues");
        }
        int perBatch = Math.max(1, Math.min(BATCH, MAX_BATCH_BYTES / (bodySize + 200)));
        int nq = queues.size();
        Semaphore inFlight = new Semaphore(IN_FLIGHT);
        AtomicReference<Throwable> failure = new AtomicReference<>();
        AtomicLong sent = new AtomicLong();
        long start = System.nanoTime();

        // Message i goes to queue i % nq; a "round" covers nq * perBatch consecutive indexes, one batch per queue.
        long roundSize = (long) nq * perBatch;
        for (long roundStart = 0; roundStart < count && failure.get() == null; roundStart += roundSize) {
            long roundEnd = Math.min(count, roundStart + roundSize);
            for (int q = 0; q < nq && failure.get() == null; q++) {
                List<Message> batch = new ArrayList<>(perBatch);
                long first = roundStart + q; // roundStart is a multiple of nq
                for (long i = first; i < roundEnd; i += nq) {
                    batch.add(message(topic, i, bodySize, tags, keyPrefix));
                }
                if (batch.isEmpty()) {
                    continue;
                }
                inFlight.acquire();
                send(producer, batch, queues.get(q), 0, inFlight, failure, sent);
            }
        }
        if (!inFlight.tryAcquire(IN_FLIGHT, 120, TimeUnit.SECONDS)) {
            throw new IllegalStateException("bulk sends did not complete in time");
        }
        inFlight.release(IN_FLIGHT);
        if (failure.get() != null) {
            throw new IllegalStateException("bulk send failed after " + sent.get() + " messages", failure.get());
        }
        JsonObject o = new JsonObject();
        o.addProperty("sent", sent.get());
        o.addProperty("seconds", (System.nanoTime() - start) / 1e9);
        return o;
    }

    /**
     * Send one batch asynchronously; the permit is released when it is stored or finally failed. A batch the broker
     * refused because it was busy (SYSTEM_BUSY: its send queue waited too long, e.g. while its JIT warms up on a
     * loaded machine) was not stored, so it is sent again after a pause, up to MAX_BUSY_RETRIES times.
     */
    private static void send(DefaultMQProducer producer, List<Message> batch, MessageQueue mq, int attempt,
        Semaphore inFlight, AtomicReference<Throwable> failure, AtomicLong sent) throws Exception {
        final int n = batch.size();
        try {
            producer.send(batch, mq, new SendCallback() {
                @Override
                public void onSuccess(SendResult r) {
                    if (r.getSendStatus() != SendStatus.SEND_OK) {
                        failure.compareAndSet(null, new IllegalStateException("send status " + r.getSendStatus()));
                    }
                    sent.addAndGet(n);
                    inFlight.release();
                }

                @Override
                public void onException(Throwable e) {
                    if (attempt < MAX_BUSY_RETRIES && e instanceof MQBrokerException
                        && ((MQBrokerException) e).getResponseCode() == ResponseCode.SYSTEM_BUSY) {
                        RETRY.schedule(() -> {
                            try {
                                send(producer, batch, mq, attempt + 1, inFlight, failure, sent);
                            } catch (Exception again) {
                                failure.compareAndSet(null, again);
                                inFlight.release();
                            }
                        }, 50L * (attempt + 1), TimeUnit.MILLISECONDS);
                        return;
                    }
                    failure.compareAndSet(null, e);
                    inFlight.release();
                }
            }, 30_000);
        } catch (Exception e) {
            inFlight.release();
            throw e;
        }
    }

    /** Deterministic body: "<i>:" followed by the repeated letter ('a' + i % 26), cut to bodySize bytes. */
    static Message message(String topic, long i, int bodySize, List<String> tags, String keyPrefix) {
        byte[] body = new byte[bodySize];
        byte[] head = (i + ":").getBytes(StandardCharsets.US_ASCII);
        byte fill = (byte) ('a' + (int) (i % 26));
        for (int k = 0; k < bodySize; k++) {
            body[k] = k < head.length ? head[k] : fill;
        }
        Message m = new Message(topic, body);
        if (tags != null && !tags.isEmpty()) {
            m.setTags(tags.get((int) (i % tags.size())));
        }
        if (keyPrefix != null) {
            m.setKeys(keyPrefix + i);
        }
        return m;
    }
}
