package org.rmqspark.shim;

import com.google.gson.JsonObject;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.PullCallback;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.consumer.PullStatus;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.RPCHook;
import org.apache.rocketmq.remoting.protocol.admin.TopicOffset;
import org.apache.rocketmq.remoting.protocol.admin.TopicStatsTable;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Benchmark references built on the official Java client, run inside the shim's JVM:
 * <ul>
 *   <li>{@code benchJavaLitePull}: {@link DefaultLitePullConsumer} (the client an application would use) assigned
 *       every queue of a topic, each seeked to its min offset, polled until every queue reached the max offset
 *       taken at the start;</li>
 *   <li>{@code benchCeiling}: asynchronous pulls of {@link DefaultMQPullConsumer}, many in flight per queue, as
 *       the most this broker serves on this machine;</li>
 *   <li>{@code benchProduceRate}: a steady-rate producer for latency measurements.</li>
 * </ul>
 * The readers count every message of {@code [min, max)} exactly once; their "seconds" cover the reading only
 * (client start, route and offset look-ups are set-up and not timed).
 */
final class BenchReaders {
    private static final Comparator<MessageQueue> QUEUE_ORDER =
        Comparator.comparing(MessageQueue::getBrokerName).thenComparingInt(MessageQueue::getQueueId);
    private static final AtomicInteger RUNS = new AtomicInteger();
    /** The broker's default maxTransferBytesOnMessageInMemory. */
    private static final long MAX_TRANSFER_BYTES = 256 * 1024;

    private final EmbeddedCluster cluster;
    private final Clients clients;

    BenchReaders(EmbeddedCluster cluster, Clients clients) {
        this.cluster = cluster;
        this.clients = clients;
    }

    /** Every queue of the topic with its [min, max) at this moment, in queue order. */
    private Map<MessageQueue, long[]> ranges(String topic) throws Exception {
        TopicStatsTable stats = clients.admin().examineTopicStats(topic);
        List<MessageQueue> queues = new ArrayList<>(stats.getOffsetTable().keySet());
        queues.sort(QUEUE_ORDER);
        Map<MessageQueue, long[]> out = new java.util.LinkedHashMap<>();
        for (MessageQueue mq : queues) {
            TopicOffset o = stats.getOffsetTable().get(mq);
            out.put(mq, new long[] {o.getMinOffset(), o.getMaxOffset()});
        }
        if (out.isEmpty()) {
            throw new IllegalArgumentException("topic " + topic + " has no queues");
        }
        return out;
    }

    private static long expected(Map<MessageQueue, long[]> ranges) {
        long n = 0;
        for (long[] r : ranges.values()) {
            n += r[1] - r[0];
        }
        return n;
    }

    private static JsonObject result(long messages, long bodyBytes, double seconds, long expected, long gaps,
        long skipped, int queues) {
        JsonObject o = new JsonObject();
        o.addProperty("messages", messages);
        o.addProperty("bodyBytes", bodyBytes);
        o.addProperty("seconds", seconds);
        o.addProperty("expected", expected);
        o.addProperty("gaps", gaps);
        o.addProperty("skipped", skipped);
        o.addProperty("queues", queues);
        return o;
    }

    // ------------------------------------------------------------------------------------------ lite pull

    /** Per-queue bookkeeping of the lite-pull reader: the next offset to count and the end. */
    private static final class Cursor {
        long next;
        final long end;

        Cursor(long next, long end) {
            this.next = next;
            this.end = end;
        }
    }

    JsonObject javaLitePull(Args a) throws Exception {
        String topic = a.str("topic");
        int batch = a.integer("pullBatchSize", 32);
        long timeoutMs = a.lng("timeoutMs", 600_000L);
        Map<MessageQueue, long[]> ranges = ranges(topic);
        long expected = expected(ranges);

        String name = "rmq-bench-litepull-" + RUNS.incrementAndGet() + "-" + System.currentTimeMillis();
        RPCHook hook = clients.hook();
        DefaultLitePullConsumer c = hook == null ? new DefaultLitePullConsumer(name)
            : new DefaultLitePullConsumer(name, hook);
        c.setNamesrvAddr(cluster.nameServerAddress());
        c.setInstanceName(name);
        c.setPullBatchSize(batch);
        // The one setting changed from the default, and only for topics of more than 20 queues: each queue's pull
        // task runs on one of pullThreadNums (default 20) threads, and a task at the end of its queue holds its
        // thread in a 20 s long poll (brokerSuspendMaxTimeMillis). With 32 queues and 20 threads the queues still
        // being read starve behind them: 1M messages took 105-200 s instead of ~3 s. One thread per queue.
        int threads = a.integer("pullThreadNums", Math.max(20, ranges.size()));
        c.setPullThreadNums(threads);
        // Where to start. "committed" (default): the new group's offsets are set to each queue's min offset on the
        // broker before start, and assign() starts there. "seek": assign(), then seek(mq, min) per queue, the
        // documented way, which races in DefaultLitePullConsumerImpl (5.5.0): the pull task started by assign()
        // can put its answer in after the seek and move the pull offset, so messages are skipped (seen: 160 of
        // 1,000,000 in one run). Both use the official client only.
        boolean seek = "seek".equals(a.str("start", "committed"));
        if (!seek) {
            commitStart(name, ranges);
        }
        c.start();
        Map<String, Cursor> cursors = new HashMap<>();
        int open = 0;
        for (Map.Entry<MessageQueue, long[]> e : ranges.entrySet()) {
            Cursor cur = new Cursor(e.getValue()[0], e.getValue()[1]);
            cursors.put(key(e.getKey().getBrokerName(), e.getKey().getQueueId()), cur);
            if (cur.next < cur.end) {
                open++;
            }
        }
        long messages = 0;
        long bodyBytes = 0;
        long gaps = 0;
        long skipped = 0;
        long t0;
        long last;
        try {
            if (seek) {
                c.assign(new ArrayList<>(ranges.keySet()));
                t0 = System.nanoTime();
                for (Map.Entry<MessageQueue, long[]> e : ranges.entrySet()) {
                    c.seek(e.getKey(), e.getValue()[0]);
                }
            } else {
                t0 = System.nanoTime();
                c.assign(new ArrayList<>(ranges.keySet()));
            }
            last = t0;
            long deadline = t0 + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
            while (open > 0) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("benchJavaLitePull: read " + messages + " of " + expected
                        + " messages within " + timeoutMs + " ms");
                }
                List<MessageExt> msgs = c.poll(1000);
                if (msgs.isEmpty()) {
                    continue;
                }
                for (MessageExt m : msgs) {
                    Cursor cur = cursors.get(key(m.getBrokerName(), m.getQueueId()));
                    long off = m.getQueueOffset();
                    if (cur == null || off < cur.next || off >= cur.end) {
                        skipped++; // a message outside the range, or seen before: never counted twice
                        continue;
                    }
                    gaps += off - cur.next;
                    cur.next = off + 1;
                    messages++;
                    bodyBytes += m.getBody() == null ? 0 : m.getBody().length;
                    if (cur.next == cur.end) {
                        open--;
                    }
                }
                last = System.nanoTime();
            }
        } finally {
            shutdownQuietly(c::shutdown);
        }
        JsonObject o = result(messages, bodyBytes, (last - t0) / 1e9, expected, gaps, skipped, ranges.size());
        o.addProperty("pullThreadNums", threads);
        return o;
    }

    /** Create the group on each broker and store each queue's min offset as its committed offset. */
    private void commitStart(String group, Map<MessageQueue, long[]> ranges) throws Exception {
        org.apache.rocketmq.tools.admin.DefaultMQAdminExt admin = clients.admin();
        java.util.Set<String> brokers = new java.util.TreeSet<>();
        for (MessageQueue mq : ranges.keySet()) {
            brokers.add(mq.getBrokerName());
        }
        for (String b : brokers) {
            org.apache.rocketmq.remoting.protocol.subscription.SubscriptionGroupConfig g =
                new org.apache.rocketmq.remoting.protocol.subscription.SubscriptionGroupConfig();
            g.setGroupName(group);
            admin.createAndUpdateSubscriptionGroupConfig(cluster.broker(b).address(), g);
        }
        for (Map.Entry<MessageQueue, long[]> e : ranges.entrySet()) {
            admin.updateConsumeOffset(cluster.broker(e.getKey().getBrokerName()).address(), group, e.getKey(),
                e.getValue()[0]);
        }
    }

    private static String key(String brokerName, int queueId) {
        return brokerName + "/" + queueId;
    }

    // ------------------------------------------------------------------------------------------ ceiling

    /** One queue of the ceiling reader: slots of {@code batch} offsets handed out in order. */
    private static final class QueueSlots {
        final MessageQueue mq;
        final long end;
        long nextSlot;
        int open; // slots in flight

        QueueSlots(MessageQueue mq, long start, long end) {
            this.mq = mq;
            this.nextSlot = start;
            this.end = end;
        }
    }

    /** Shared state of one ceiling run. */
    private static final class CeilingRun {
        final DefaultMQPullConsumer consumer;
        final int batch;
        final AtomicLong messages = new AtomicLong();
        final AtomicLong bodyBytes = new AtomicLong();
        final AtomicLong repulls = new AtomicLong();
        final AtomicReference<Throwable> failure = new AtomicReference<>();
        final CountDownLatch done;
        final AtomicLong lastNanos = new AtomicLong();
        /** Offsets asked per pull: the batch size, lowered to what fits the broker's 256 KiB per pull (from memory)
         *  once record sizes are known, so large messages are not pulled twice (a short answer, then the rest). */
        volatile int slot;

        CeilingRun(DefaultMQPullConsumer consumer, int batch, int queues) {
            this.consumer = consumer;
            this.batch = batch;
            this.done = new CountDownLatch(queues);
            this.slot = batch;
        }

        void fail(Throwable t) {
            if (failure.compareAndSet(null, t)) {
                while (done.getCount() > 0) {
                    done.countDown();
                }
            }
        }

        /** Hand out the queue's next slot, or finish the queue when nothing is left and nothing in flight. */
        void nextSlot(QueueSlots q) {
            long low;
            long high;
            synchronized (q) {
                if (q.nextSlot >= q.end) {
                    q.open--;
                    if (q.open == 0) {
                        lastNanos.accumulateAndGet(System.nanoTime(), Math::max);
                        done.countDown();
                    }
                    return;
                }
                low = q.nextSlot;
                high = Math.min(q.end, low + slot);
                q.nextSlot = high;
            }
            pull(q, low, high, 0);
        }

        /** Pull [low, high) of the queue; count what falls in it; pull again what the answer did not cover. */
        void pull(QueueSlots q, long low, long high, int attempt) {
            if (failure.get() != null) {
                return;
            }
            try {
                consumer.pull(q.mq, "*", low, (int) (high - low), new PullCallback() {
                    @Override
                    public void onSuccess(PullResult r) {
                        long covered;
                        if (r.getPullStatus() == PullStatus.FOUND) {
                            long n = 0;
                            long bytes = 0;
                            int largest = 0;
                            if (r.getMsgFoundList() != null) {
                                for (MessageExt m : r.getMsgFoundList()) {
                                    largest = Math.max(largest, m.getStoreSize());
                                    long off = m.getQueueOffset();
                                    if (off >= low && off < high) {
                                        n++;
                                        bytes += m.getBody() == null ? 0 : m.getBody().length;
                                    }
                                }
                            }
                            messages.addAndGet(n);
                            bodyBytes.addAndGet(bytes);
                            if (largest > 0) {
                                int fit = (int) Math.max(1, Math.min(batch, MAX_TRANSFER_BYTES / largest));
                                if (fit < slot) {
                                    slot = fit;
                                }
                            }
                            covered = Math.min(high, r.getNextBeginOffset());
                        } else if (r.getPullStatus() == PullStatus.NO_MATCHED_MSG) {
                            covered = Math.min(high, r.getNextBeginOffset());
                        } else if (r.getPullStatus() == PullStatus.NO_NEW_MSG && attempt < 100) {
                            covered = low; // not visible yet: ask again
                        } else {
                            fail(new IllegalStateException(q.mq + ": pull at " + low + " answered "
                                + r.getPullStatus() + " (next " + r.getNextBeginOffset() + ", min "
                                + r.getMinOffset() + ", max " + r.getMaxOffset() + ")"));
                            return;
                        }
                        if (covered <= low) {
                            pull(q, low, high, attempt + 1);
                        } else if (covered < high) {
                            repulls.incrementAndGet();
                            pull(q, covered, high, 0);
                        } else {
                            nextSlot(q);
                        }
                    }

                    @Override
                    public void onException(Throwable e) {
                        if (attempt < 3) {
                            pull(q, low, high, attempt + 1);
                        } else {
                            fail(e);
                        }
                    }
                });
            } catch (Exception e) {
                if (attempt < 3) {
                    EmbeddedCluster.sleep(10);
                    pull(q, low, high, attempt + 1);
                } else {
                    fail(e);
                }
            }
        }
    }

    @SuppressWarnings("deprecation")
    JsonObject ceiling(Args a) throws Exception {
        String topic = a.str("topic");
        int inflight = a.integer("inflightPerQueue", 16);
        int batch = a.integer("pullBatchSize", 32);
        long timeoutMs = a.lng("timeoutMs", 600_000L);
        Map<MessageQueue, long[]> ranges = ranges(topic);
        long expected = expected(ranges);

        String name = "rmq-bench-ceiling-" + RUNS.incrementAndGet() + "-" + System.currentTimeMillis();
        RPCHook hook = clients.hook();
        DefaultMQPullConsumer c = new DefaultMQPullConsumer(name, hook);
        c.setNamesrvAddr(cluster.nameServerAddress());
        c.setInstanceName(name);
        c.start();
        try {
            c.fetchSubscribeMessageQueues(topic); // the route, so the first pulls find their broker
            List<QueueSlots> queues = new ArrayList<>();
            for (Map.Entry<MessageQueue, long[]> e : ranges.entrySet()) {
                queues.add(new QueueSlots(e.getKey(), e.getValue()[0], e.getValue()[1]));
            }
            CeilingRun run = new CeilingRun(c, batch, queues.size());
            long t0 = System.nanoTime();
            run.lastNanos.set(t0);
            for (QueueSlots q : queues) {
                synchronized (q) {
                    q.open = inflight;
                }
            }
            for (int i = 0; i < inflight; i++) {
                for (QueueSlots q : queues) {
                    run.nextSlot(q); // a queue with fewer slots than `inflight` just closes the spare ones
                }
            }
            if (!run.done.await(timeoutMs, TimeUnit.MILLISECONDS)) {
                throw new IllegalStateException("benchCeiling: read " + run.messages.get() + " of " + expected
                    + " messages within " + timeoutMs + " ms");
            }
            if (run.failure.get() != null) {
                throw new IllegalStateException("benchCeiling failed after " + run.messages.get() + " messages",
                    run.failure.get());
            }
            JsonObject o = result(run.messages.get(), run.bodyBytes.get(), (run.lastNanos.get() - t0) / 1e9,
                expected, expected - run.messages.get(), 0, ranges.size());
            o.addProperty("repulls", run.repulls.get());
            o.addProperty("inflightPerQueue", inflight);
            o.addProperty("slot", run.slot);
            return o;
        } finally {
            shutdownQuietly(c::shutdown);
        }
    }

    // ------------------------------------------------------------------------------------------ steady producer

    /**
     * Sends {@code rate} messages per second for {@code seconds}, in ticks of 10 ms (one asynchronous batch per
     * tick, queues in turn); bornTimestamp is the send time, so a reader can measure end-to-end latency.
     */
    JsonObject produceRate(Args a) throws Exception {
        String topic = a.str("topic");
        int rate = a.integer("rate");
        double seconds = a.get("seconds").getAsDouble();
        int bodySize = a.integer("bodySize", 100);
        DefaultMQProducer producer = clients.producer();
        producer.getDefaultMQProducerImpl().getMqClientFactory().updateTopicRouteInfoFromNameServer(topic);
        List<MessageQueue> queues = new ArrayList<>(producer.fetchPublishMessageQueues(topic));
        queues.sort(QUEUE_ORDER);
        if (queues.isEmpty()) {
            throw new IllegalArgumentException("topic " + topic + " has no write queues");
        }
        AtomicLong acked = new AtomicLong();
        AtomicReference<Throwable> failure = new AtomicReference<>();
        AtomicInteger inFlight = new AtomicInteger();
        long tickNanos = 10_000_000L;
        long start = System.nanoTime();
        long end = start + (long) (seconds * 1e9);
        long sent = 0;
        long tick = 0;
        while (System.nanoTime() < end && failure.get() == null) {
            long due = (long) Math.floor(rate * ((tick + 1) * tickNanos) / 1e9);
            int n = (int) (due - sent);
            if (n > 0) {
                List<Message> batch = new ArrayList<>(n);
                for (int i = 0; i < n; i++) {
                    batch.add(BulkLoad.message(topic, sent + i, bodySize, List.of("TagA"), "key-"));
                }
                final int count = n;
                inFlight.incrementAndGet();
                producer.send(batch, queues.get((int) (tick % queues.size())), new SendCallback() {
                    @Override
                    public void onSuccess(SendResult r) {
                        acked.addAndGet(count);
                        inFlight.decrementAndGet();
                    }

                    @Override
                    public void onException(Throwable e) {
                        failure.compareAndSet(null, e);
                        inFlight.decrementAndGet();
                    }
                }, 10_000);
                sent += n;
            }
            tick++;
            long wait = start + tick * tickNanos - System.nanoTime();
            if (wait > 0) {
                TimeUnit.NANOSECONDS.sleep(wait);
            }
        }
        long waitUntil = System.currentTimeMillis() + 15_000;
        while (inFlight.get() > 0 && System.currentTimeMillis() < waitUntil) {
            EmbeddedCluster.sleep(5);
        }
        if (failure.get() != null) {
            throw new IllegalStateException("steady produce failed after " + acked.get() + " messages",
                failure.get());
        }
        JsonObject o = new JsonObject();
        o.addProperty("sent", sent);
        o.addProperty("acked", acked.get());
        o.addProperty("seconds", (System.nanoTime() - start) / 1e9);
        return o;
    }

    private static void shutdownQuietly(Runnable r) {
        try {
            r.run();
        } catch (Throwable t) {
            System.err.println("rmq-shim: bench client shutdown failed: " + t);
        }
    }
}
