package org.rmqspark.shim;

import com.google.gson.JsonArray;
import com.google.gson.JsonObject;
import org.apache.rocketmq.broker.BrokerController;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.topic.TopicValidator;
import org.apache.rocketmq.store.CommitLog;
import org.apache.rocketmq.store.DefaultMessageStore;
import org.apache.rocketmq.store.MessageStore;
import org.apache.rocketmq.store.queue.ConsumeQueueInterface;
import org.apache.rocketmq.store.queue.ConsumeQueueStore;
import org.apache.rocketmq.store.queue.ConsumeQueueStoreInterface;

import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentMap;

/** Direct operations on a running broker's message store (used by data-loss tests). */
final class StoreMaintenance {
    private StoreMaintenance() {
    }

    /**
     * Deletes every commit-log file but the newest, then (with {@code correctQueues}) lets each consume queue drop the
     * files and entries that pointed into them (raising the queues' min offsets), and the index files likewise. This
     * is what the broker's own clean-up services do when a manual deletion is requested (executeDeleteFilesManually),
     * but without their 72-hour retention and their 60-second start delay. Without {@code correctQueues} the consume
     * queues keep pointing into the deleted files until the broker's periodic clean-up corrects them (every
     * cleanResourceInterval, 10 s): meanwhile a pull there is answered PULL_RETRY_IMMEDIATELY (MESSAGE_WAS_REMOVING).
     *
     * @return the broker's offsets per topic after the deletion
     */
    static JsonObject deleteOldFiles(String brokerName, BrokerController controller, boolean correctQueues) {
        DefaultMessageStore store = defaultStore(controller.getMessageStore());
        store.executeDeleteFilesManually(); // same request as the admin command; the next periodic run honours it
        CommitLog commitLog = store.getCommitLog();
        long deadline = System.currentTimeMillis() + 30_000;
        while (commitLog.getMappedFileQueue().getMappedFiles().size() > 1) {
            // expiredTime 0 + cleanImmediately: every file but the last is due; a file still referenced by a reader
            // is marked and destroyed forcibly by a later call after intervalForcibly (1 s).
            commitLog.deleteExpiredFile(0L, 0, 1000L, true, Integer.MAX_VALUE);
            if (commitLog.getMappedFileQueue().getMappedFiles().size() <= 1) {
                break;
            }
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("commit-log files of " + brokerName + " could not all be deleted");
            }
            EmbeddedCluster.sleep(200);
        }
        return correctQueues ? correctQueues(brokerName, controller) : brokerOffsets(brokerName, controller);
    }

    /**
     * Lets each consume queue drop the files and entries that point below the commit log's first offset (raising
     * the queues' min offsets), and the index files likewise: what the broker's CleanConsumeQueueService does.
     *
     * @return the broker's offsets per topic after the correction
     */
    static JsonObject correctQueues(String brokerName, BrokerController controller) {
        DefaultMessageStore store = defaultStore(controller.getMessageStore());
        long minPhyOffset = store.getCommitLog().getMinOffset();
        ConsumeQueueStoreInterface queueStore = store.getQueueStore();
        long deadline = System.currentTimeMillis() + 30_000;
        // A consume-queue file that a pull still reads is only destroyed later: repeat until every queue starts in
        // the commit log that is left.
        while (true) {
            boolean behind = false;
            for (ConcurrentMap<Integer, ConsumeQueueInterface> queues : store.getConsumeQueueTable().values()) {
                for (ConsumeQueueInterface cq : queues.values()) {
                    if (queueStore instanceof ConsumeQueueStore) {
                        ((ConsumeQueueStore) queueStore).deleteExpiredFile(cq, minPhyOffset);
                    } else {
                        cq.correctMinOffset(minPhyOffset);
                    }
                    long min = cq.getMinOffsetInQueue();
                    behind |= min < cq.getMaxOffsetInQueue()
                        && store.getCommitLogOffsetInQueue(cq.getTopic(), cq.getQueueId(), min) < minPhyOffset;
                }
            }
            if (!behind) {
                break;
            }
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("the consume queues of " + brokerName + " still point below the "
                    + "commit log's first offset " + minPhyOffset + " after 30 s");
            }
            EmbeddedCluster.sleep(200);
        }
        store.getIndexService().deleteExpiredFile(minPhyOffset);
        return brokerOffsets(brokerName, controller);
    }

    /** {topic: [{brokerName, queueId, minOffset, maxOffset, lastUpdateTimestamp}, ...]} of the broker's user topics. */
    static JsonObject brokerOffsets(String brokerName, BrokerController controller) {
        MessageStore store = controller.getMessageStore();
        Map<String, TopicConfig> topics = new TreeMap<>(controller.getTopicConfigManager().getTopicConfigTable());
        JsonObject out = new JsonObject();
        for (Map.Entry<String, TopicConfig> e : topics.entrySet()) {
            String topic = e.getKey();
            if (TopicValidator.isSystemTopic(topic) || topic.startsWith("%") || topic.equals(brokerName)
                || topic.equals(EmbeddedCluster.CLUSTER)) {
                continue;
            }
            JsonArray arr = new JsonArray();
            int queues = Math.max(e.getValue().getReadQueueNums(), e.getValue().getWriteQueueNums());
            for (int q = 0; q < queues; q++) {
                long min = store.getMinOffsetInQueue(topic, q);
                long max;
                try {
                    max = store.getMaxOffsetInQueue(topic, q);
                } catch (Exception ex) {
                    throw new IllegalStateException(ex);
                }
                long last = max > 0 ? store.getMessageStoreTimeStamp(topic, q, max - 1) : 0;
                JsonObject o = new JsonObject();
                o.addProperty("brokerName", brokerName);
                o.addProperty("queueId", q);
                o.addProperty("minOffset", min);
                o.addProperty("maxOffset", max);
                o.addProperty("lastUpdateTimestamp", last);
                arr.add(o);
            }
            out.add(topic, arr);
        }
        return out;
    }

    private static DefaultMessageStore defaultStore(MessageStore s) {
        if (s instanceof DefaultMessageStore) {
            return (DefaultMessageStore) s;
        }
        throw new IllegalStateException("unexpected message store type " + s.getClass().getName());
    }
}
