package org.rmqspark.shim.gateway;

import apache.rocketmq.v2.Code;
import apache.rocketmq.v2.FilterExpression;
import apache.rocketmq.v2.FilterType;
import apache.rocketmq.v2.PullMessageRequest;
import apache.rocketmq.v2.PullMessageResponse;
import apache.rocketmq.v2.Status;
import com.google.protobuf.Duration;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.StreamObserver;
import org.apache.rocketmq.client.consumer.PullCallback;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.consumer.PullStatus;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.impl.CommunicationMode;
import org.apache.rocketmq.client.impl.consumer.PullResultExt;
import org.apache.rocketmq.common.filter.ExpressionType;
import org.apache.rocketmq.common.message.MessageClientExt;
import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.sysflag.MessageSysFlag;
import org.apache.rocketmq.common.sysflag.PullSysFlag;
import org.apache.rocketmq.filter.FilterFactory;
import org.apache.rocketmq.remoting.protocol.RemotingSysResponseCode;
import org.apache.rocketmq.remoting.protocol.filter.FilterAPI;
import org.apache.rocketmq.remoting.protocol.header.PullMessageRequestHeader;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;

/**
 * PullMessage: exactly one broker pull per call, answered as a stream of the status, then the messages in queue
 * order, then the next offset. FOUND and NO_MATCHED_MSG answer OK, NO_NEW_MSG answers MESSAGE_NOT_FOUND,
 * OFFSET_ILLEGAL answers ILLEGAL_OFFSET; any failure answers its status alone. Messages are decoded as the Java
 * client does (bodies decompressed, inner batches unwrapped, offsetDelta applied, TAG filters re-checked by tag
 * string), without the properties the Java client adds after a pull.
 */
final class PullHandler {
    static final int MAX_BATCH = 32;
    private static final long MAX_POLLING_MS = 300_000;

    /** One decoded message with the store-position id of the record it came from. */
    private record Pulled(MessageExt message, String offsetMsgId) {
    }

    /** The validated pull parameters. */
    private record Spec(QueueRef queue, String group, long offset, int batch, String expressionType,
                        String expression, long suspendMs) {
        String describe() {
            return "pull of " + queue + ", group " + group + ", offset " + offset;
        }
    }

    private final BrokerClient client;
    private final BrokerDirectory directory;

    PullHandler(BrokerClient client, BrokerDirectory directory) {
        this.client = client;
        this.directory = directory;
    }

    void pull(PullMessageRequest req, StreamObserver<PullMessageResponse> out) {
        Spec spec = null;
        try {
            spec = spec(req);
            String addr = directory.masterAddress(spec.queue.topic, spec.queue.broker, spec.queue.queueId);
            client.api().pullMessage(addr, header(spec), client.timeoutMs() + spec.suspendMs,
                CommunicationMode.ASYNC, callback(spec, out));
        } catch (Throwable t) {
            fail(spec, t, out);
        }
    }

    private static Spec spec(PullMessageRequest req) {
        CallerAuth.require();
        QueueRef q = QueueRef.of(req.hasMessageQueue(), req.getMessageQueue());
        String group = QueueRef.name(req.hasGroup(), req.getGroup(), "group");
        int batch = req.getBatchSize();
        if (batch < 0 || batch > MAX_BATCH) {
            throw GatewayException.badRequest("batch_size must be within 0.." + MAX_BATCH + " (0 means " + MAX_BATCH
                + "), got " + batch + " (" + q + ")");
        }
        if (batch == 0) {
            batch = MAX_BATCH;
        }
        String type = ExpressionType.TAG;
        String expression = "*";
        if (req.hasFilterExpression()) {
            FilterExpression f = req.getFilterExpression();
            if (f.getType() == FilterType.SQL) {
                type = ExpressionType.SQL92;
                if (f.getExpression().isBlank()) {
                    throw new GatewayException(Code.ILLEGAL_FILTER_EXPRESSION, "empty SQL filter expression (" + q + ")");
                }
                expression = f.getExpression();
                checkSql(expression, q);
            } else if (f.getType() == FilterType.TAG || f.getType() == FilterType.FILTER_TYPE_UNSPECIFIED) {
                expression = f.getExpression().isBlank() ? "*" : f.getExpression();
            } else {
                throw new GatewayException(Code.ILLEGAL_FILTER_EXPRESSION, "unknown filter type "
                    + f.getTypeValue() + " (" + q + ")");
            }
        }
        long suspendMs = 0;
        if (req.hasLongPollingTimeout()) {
            Duration d = req.getLongPollingTimeout();
            if (d.getSeconds() < 0 || d.getNanos() < 0) {
                throw new GatewayException(Code.ILLEGAL_POLLING_TIME, "long_polling_timeout must not be negative ("
                    + q + ")");
            }
            suspendMs = Math.min(d.getSeconds(), MAX_POLLING_MS) * 1000 + d.getNanos() / 1_000_000;
            if (suspendMs > MAX_POLLING_MS) {
                throw new GatewayException(Code.ILLEGAL_POLLING_TIME, "long_polling_timeout is at most "
                    + MAX_POLLING_MS / 1000 + " s (" + q + ")");
            }
        }
        return new Spec(q, group, req.getOffset(), batch, type, expression, suspendMs);
    }

    /**
     * Compiles a SQL92 filter as the broker would. A broker given a pull with an inline subscription whose SQL does
     * not compile drops the filter silently and answers every message; the gateway refuses it instead.
     */
    private static void checkSql(String expression, QueueRef q) {
        try {
            FilterFactory.INSTANCE.get(ExpressionType.SQL92).compile(expression);
        } catch (Exception e) {
            String why = String.valueOf(e.getCause() != null ? e.getCause().getMessage() : e.getMessage());
            why = why.replaceAll("\\s+", " ");
            throw new GatewayException(Code.ILLEGAL_FILTER_EXPRESSION, "SQL92 filter does not compile: " + expression
                + " (" + (why.length() > 160 ? why.substring(0, 160) + "..." : why) + "; " + q + ")");
        }
    }

    private static PullMessageRequestHeader header(Spec s) {
        PullMessageRequestHeader h = new PullMessageRequestHeader();
        h.setConsumerGroup(s.group);
        h.setTopic(s.queue.topic);
        h.setQueueId(s.queue.queueId);
        h.setBrokerName(s.queue.broker);
        h.setQueueOffset(s.offset);
        h.setMaxMsgNums(s.batch);
        // the subscription travels with the pull (no heartbeat needed); no offset commit; hold when asked to
        h.setSysFlag(PullSysFlag.buildSysFlag(false, s.suspendMs > 0, true, false));
        h.setCommitOffset(0L);
        h.setSuspendTimeoutMillis(s.suspendMs);
        h.setSubscription(s.expression);
        h.setSubVersion(System.currentTimeMillis());
        h.setExpressionType(s.expressionType);
        return h;
    }

    private PullCallback callback(Spec spec, StreamObserver<PullMessageResponse> out) {
        return new PullCallback() {
            @Override
            public void onSuccess(PullResult result) {
                List<PullMessageResponse> answer;
                try {
                    answer = answer(spec, (PullResultExt) result);
                } catch (Throwable t) {
                    fail(spec, t, out);
                    return;
                }
                send(out, answer);
            }

            @Override
            public void onException(Throwable t) {
                fail(spec, t, out);
            }
        };
    }

    /** The whole stream for a broker answer, built before anything is sent (a decode failure sends no message). */
    private static List<PullMessageResponse> answer(Spec spec, PullResultExt r) throws Exception {
        List<PullMessageResponse> out = new ArrayList<>();
        PullStatus st = r.getPullStatus();
        Status status;
        List<Pulled> found = List.of();
        switch (st) {
            case FOUND:
                found = filter(spec, decode(spec, r));
                status = Statuses.OK;
                break;
            case NO_MATCHED_MSG:
                status = Statuses.OK;
                break;
            case NO_NEW_MSG:
                status = Statuses.of(Code.MESSAGE_NOT_FOUND, "no message at offset " + spec.offset + " yet ("
                    + spec.queue + ", max offset " + r.getMaxOffset() + ")");
                break;
            case OFFSET_ILLEGAL:
                status = Statuses.of(Code.ILLEGAL_OFFSET, "offset " + spec.offset + " is outside what the broker holds ("
                    + spec.queue + ", min offset " + r.getMinOffset() + ", max offset " + r.getMaxOffset() + ")");
                break;
            default:
                throw new IllegalStateException("unexpected pull status " + st);
        }
        out.add(PullMessageResponse.newBuilder().setStatus(status).build());
        for (Pulled p : found) {
            out.add(PullMessageResponse.newBuilder().setMessage(V2Messages.fromPulled(p.message, p.offsetMsgId)).build());
        }
        out.add(PullMessageResponse.newBuilder().setNextOffset(r.getNextBeginOffset()).build());
        return out;
    }

    /** Decodes the pulled records in order; a record that cannot be decoded fails the pull (nothing is skipped). */
    private static List<Pulled> decode(Spec spec, PullResultExt r) throws Exception {
        byte[] binary = r.getMessageBinary();
        List<Pulled> out = new ArrayList<>();
        if (binary == null) {
            return out;
        }
        ByteBuffer buf = ByteBuffer.wrap(binary);
        long delta = r.getOffsetDelta() == null ? 0 : r.getOffsetDelta();
        while (buf.hasRemaining()) {
            int at = buf.position();
            MessageExt m = MessageDecoder.decode(buf, true, true, true);
            if (m == null) {
                throw new GatewayException(Code.INTERNAL_SERVER_ERROR, spec.describe() + ": the broker's record at byte "
                    + at + " of " + binary.length + " could not be decoded");
            }
            String offsetMsgId = ((MessageClientExt) m).getOffsetMsgId();
            if (MessageSysFlag.check(m.getSysFlag(), MessageSysFlag.INNER_BATCH_FLAG)
                && MessageSysFlag.check(m.getSysFlag(), MessageSysFlag.NEED_UNWRAP_FLAG)) {
                List<MessageExt> inner = new ArrayList<>();
                MessageDecoder.decodeMessage(m, inner);
                for (MessageExt i : inner) {
                    out.add(placed(i, spec, delta, offsetMsgId));
                }
            } else {
                out.add(placed(m, spec, delta, offsetMsgId));
            }
        }
        return out;
    }

    private static Pulled placed(MessageExt m, Spec spec, long delta, String offsetMsgId) {
        m.setQueueId(spec.queue.queueId);
        m.setQueueOffset(m.getQueueOffset() + delta);
        return new Pulled(m, offsetMsgId);
    }

    /** The broker filters tags by hash code; keep only messages whose tag string is subscribed. */
    private static List<Pulled> filter(Spec spec, List<Pulled> msgs) throws Exception {
        if (!ExpressionType.TAG.equals(spec.expressionType)) {
            return msgs;
        }
        Set<String> tags = FilterAPI.buildSubscriptionData(spec.queue.topic, spec.expression).getTagsSet();
        if (tags == null || tags.isEmpty()) {
            return msgs;
        }
        List<Pulled> out = new ArrayList<>(msgs.size());
        for (Pulled p : msgs) {
            String tag = p.message.getTags();
            if (tag != null && tags.contains(tag)) {
                out.add(p);
            }
        }
        return out;
    }

    private void fail(Spec spec, Throwable t, StreamObserver<PullMessageResponse> out) {
        String what = spec != null ? spec.describe() : "pull";
        Status status = Statuses.of(t, what);
        if (spec != null && ExpressionType.SQL92.equals(spec.expressionType) && t instanceof MQBrokerException
            && ((MQBrokerException) t).getResponseCode() == RemotingSysResponseCode.SYSTEM_ERROR
            && String.valueOf(((MQBrokerException) t).getErrorMessage()).contains("filter")) {
            status = Statuses.of(Code.ILLEGAL_FILTER_EXPRESSION, status.getMessage());
        }
        if (spec != null && status.getCode() == Code.PROXY_TIMEOUT) {
            directory.invalidate(spec.queue.topic);
        }
        send(out, List.of(PullMessageResponse.newBuilder().setStatus(status).build()));
    }

    private static void send(StreamObserver<PullMessageResponse> out, List<PullMessageResponse> answer) {
        if (out instanceof ServerCallStreamObserver && ((ServerCallStreamObserver<?>) out).isCancelled()) {
            return;
        }
        try {
            for (PullMessageResponse r : answer) {
                out.onNext(r);
            }
            out.onCompleted();
        } catch (RuntimeException e) {
            // the caller went away meanwhile (cancelled or deadline passed): nobody to answer
        }
    }
}
