package org.rmqspark.kafkashim;

import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/** The benchmark's client side of the node: topics, the bulk load, the count of what a topic holds. */
final class Tools implements AutoCloseable {
    private final String bootstrap;
    private final Admin admin;

    Tools(String bootstrap) {
        this.bootstrap = bootstrap;
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        this.admin = Admin.create(p);
    }

    /** Waits until the node answers as a broker. */
    void awaitReady(long timeoutMs) throws Exception {
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (true) {
            try {
                if (!admin.describeCluster().nodes().get(5, TimeUnit.SECONDS).isEmpty()) {
                    return;
                }
            } catch (Exception e) {
                if (System.currentTimeMillis() > deadline) {
                    throw e;
                }
            }
            Thread.sleep(100);
        }
    }

    void createTopic(String topic, int partitions) throws Exception {
        admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get(60, TimeUnit.SECONDS);
    }

    /**
     * Sends {@code count} records of {@code bodySize} bytes with the official producer (default acks=all and
     * idempotence): record i to partition i % partitions, key "key-i", the body of jvm-shim's bulk load ("i:"
     * then the letter 'a' + i % 26). Returns the seconds until every record was acknowledged.
     */
    double produce(String topic, long count, int bodySize) throws Exception {
        int partitions = partitions(topic);
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.LINGER_MS_CONFIG, "10");
        p.put(ProducerConfig.BATCH_SIZE_CONFIG, Integer.toString(256 * 1024));
        AtomicReference<Exception> failure = new AtomicReference<>();
        AtomicLong acked = new AtomicLong();
        long t0 = System.nanoTime();
        try (KafkaProducer<byte[], byte[]> producer =
                 new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer())) {
            for (long i = 0; i < count && failure.get() == null; i++) {
                byte[] key = ("key-" + i).getBytes(StandardCharsets.UTF_8);
                producer.send(new ProducerRecord<>(topic, (int) (i % partitions), key, body(i, bodySize)),
                    (meta, e) -> {
                        if (e != null) {
                            failure.compareAndSet(null, e);
                        } else {
                            acked.incrementAndGet();
                        }
                    });
            }
            producer.flush();
        }
        if (failure.get() != null) {
            throw failure.get();
        }
        if (acked.get() != count) {
            throw new IllegalStateException(acked.get() + " of " + count + " records acknowledged");
        }
        return (System.nanoTime() - t0) / 1e9;
    }

    /**
     * Sends {@code rate} records a second for {@code seconds}, as jvm-shim's steady producer does for the latency
     * line: every 10 ms the records due so far go to the next partition in turn, with the bodies and keys of
     * {@link #produce}; no linger, so each tick's records leave at once. Each record's timestamp is its send time
     * (CreateTime). Returns {sent, acknowledged, seconds}.
     */
    double[] produceRate(String topic, int rate, double seconds, int bodySize) throws Exception {
        int partitions = partitions(topic);
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.LINGER_MS_CONFIG, "0");
        AtomicReference<Exception> failure = new AtomicReference<>();
        AtomicLong acked = new AtomicLong();
        long tickNanos = 10_000_000L;
        long start = System.nanoTime();
        long end = start + (long) (seconds * 1e9);
        long sent = 0;
        try (KafkaProducer<byte[], byte[]> producer =
                 new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer())) {
            for (long tick = 0; System.nanoTime() < end && failure.get() == null; tick++) {
                long due = (long) Math.floor(rate * ((tick + 1) * tickNanos) / 1e9);
                int partition = (int) (tick % partitions);
                for (; sent < due; sent++) {
                    byte[] key = ("key-" + sent).getBytes(StandardCharsets.UTF_8);
                    producer.send(new ProducerRecord<>(topic, partition, key, body(sent, bodySize)), (meta, e) -> {
                        if (e != null) {
                            failure.compareAndSet(null, e);
                        } else {
                            acked.incrementAndGet();
                        }
                    });
                }
                long wait = start + (tick + 1) * tickNanos - System.nanoTime();
                if (wait > 0) {
                    TimeUnit.NANOSECONDS.sleep(wait);
                }
            }
            producer.flush();
        }
        if (failure.get() != null) {
            throw failure.get();
        }
        return new double[] {sent, acked.get(), (System.nanoTime() - start) / 1e9};
    }

    /** {messages held (sum of end minus start offsets), partitions}. */
    long[] count(String topic) throws Exception {
        int n = partitions(topic);
        List<TopicPartition> tps = java.util.stream.IntStream.range(0, n)
            .mapToObj(i -> new TopicPartition(topic, i)).collect(Collectors.toList());
        long held = sum(admin.listOffsets(tps.stream().collect(Collectors.toMap(t -> t, t -> OffsetSpec.latest()))))
            - sum(admin.listOffsets(tps.stream().collect(Collectors.toMap(t -> t, t -> OffsetSpec.earliest()))));
        return new long[] {held, n};
    }

    private static long sum(ListOffsetsResult r) throws Exception {
        long s = 0;
        for (ListOffsetsResult.ListOffsetsResultInfo info : r.all().get(60, TimeUnit.SECONDS).values()) {
            s += info.offset();
        }
        return s;
    }

    private int partitions(String topic) throws Exception {
        Map<String, TopicDescription> d = admin.describeTopics(List.of(topic)).allTopicNames().get(60, TimeUnit.SECONDS);
        return d.get(topic).partitions().size();
    }

    private static byte[] body(long i, int bodySize) {
        byte[] body = new byte[bodySize];
        byte[] head = (i + ":").getBytes(StandardCharsets.US_ASCII);
        byte fill = (byte) ('a' + (int) (i % 26));
        for (int k = 0; k < bodySize; k++) {
            body[k] = k < head.length ? head[k] : fill;
        }
        return body;
    }

    @Override
    public void close() {
        admin.close();
    }
}
