package org.rmqspark.gateway;

import apache.rocketmq.v2.Code;
import apache.rocketmq.v2.FilterExpression;
import apache.rocketmq.v2.FilterType;
import apache.rocketmq.v2.PullMessageRequest;
import apache.rocketmq.v2.PullMessageResponse;
import apache.rocketmq.v2.Status;
import com.google.protobuf.Duration;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.StreamObserver;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.common.filter.ExpressionType;
import org.apache.rocketmq.common.message.MessageClientExt;
import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.sysflag.MessageSysFlag;
import org.apache.rocketmq.common.sysflag.PullSysFlag;
import org.apache.rocketmq.filter.FilterFactory;
import org.apache.rocketmq.remoting.InvokeCallback;
import org.apache.rocketmq.remoting.netty.ResponseFuture;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;
import org.apache.rocketmq.remoting.protocol.RemotingSysResponseCode;
import org.apache.rocketmq.remoting.protocol.RequestCode;
import org.apache.rocketmq.remoting.protocol.ResponseCode;
import org.apache.rocketmq.remoting.protocol.filter.FilterAPI;
import org.apache.rocketmq.remoting.protocol.header.PullMessageRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.PullMessageResponseHeader;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;

/**
 * PullMessage: exactly one broker pull per call, answered as a stream of the status, then the messages in queue
 * order, then the next offset. The pull goes to the member of the broker group the broker last suggested, else the
 * master, else a slave. The broker's answer is read as it came (code, remark, header), so that its causes stay
 * apart (proto/README.md):
 * <ul>
 * <li>SUCCESS: OK with the messages; PULL_RETRY_IMMEDIATELY for NO_MATCHED_MESSAGE (the filter skipped a span):
 * OK without messages, with the next offset;</li>
 * <li>PULL_NOT_FOUND and any other PULL_RETRY_IMMEDIATELY (a slave that cannot serve the offset, a commit-log file
 * being deleted) and records outside the pulled span: MESSAGE_NOT_FOUND, "pull this offset again", next offset =
 * offset;</li>
 * <li>PULL_OFFSET_MOVED, or any answer whose min offset is past the offset (deleted): ILLEGAL_OFFSET;</li>
 * <li>any failure: its status alone.</li>
 * </ul>
 * Messages are decoded as the Java client does (bodies decompressed, inner batches unwrapped, offsetDelta
 * applied, TAG filters re-checked by tag string), without the properties the Java client adds after a pull.
 */
final class PullHandler {
    static final int MAX_BATCH = 32;
    /** The remark of a PULL_RETRY_IMMEDIATELY that means "the filter matched nothing" (the GetMessageStatus name). */
    private static final String NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE";
    private static final long MAX_POLLING_MS = 300_000;

    /** One decoded message with the store-position id of the record it came from. */
    private record Pulled(MessageExt message, String offsetMsgId) {
    }

    /** The validated pull parameters; {@code topic} as the caller names it (without its namespace). */
    private record Spec(QueueRef queue, String topic, String group, long offset, int batch, String expressionType,
                        String expression, long suspendMs) {
        String describe() {
            return "pull of " + queue + ", group " + group + ", offset " + offset;
        }
    }

    private final BrokerClient client;
    private final BrokerDirectory directory;
    /** The most a body may decompress to. */
    private final int maxMessageBytes;

    PullHandler(BrokerClient client, BrokerDirectory directory, int maxMessageBytes) {
        this.client = client;
        this.directory = directory;
        this.maxMessageBytes = maxMessageBytes;
    }

    void pull(PullMessageRequest req, StreamObserver<PullMessageResponse> out) {
        Spec spec = null;
        try {
            spec = spec(req);
            String addr = directory.readAddress(spec.queue);
            RemotingCommand request = RemotingCommand.createRequestCommand(RequestCode.PULL_MESSAGE, header(spec));
            client.api().getRemotingClient().invokeAsync(addr, request, client.timeoutMs() + spec.suspendMs,
                callback(spec, addr, out));
        } catch (Throwable t) {
            fail(spec, t, out);
        }
    }

    private static Spec spec(PullMessageRequest req) {
        Caller caller = CallerAuth.require();
        QueueRef q = QueueRef.of(req.hasMessageQueue(), req.getMessageQueue());
        caller.check(Caller.Action.READ, q.topic);
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
        return new Spec(q, req.getMessageQueue().getTopic().getName(), group, req.getOffset(), batch, type, expression,
            suspendMs);
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

    private InvokeCallback callback(Spec spec, String addr, StreamObserver<PullMessageResponse> out) {
        return new InvokeCallback() {
            @Override
            public void operationComplete(ResponseFuture future) {
                // answered in operationSucceed / operationFail
            }

            @Override
            public void operationSucceed(RemotingCommand response) {
                List<PullMessageResponse> answer;
                try {
                    answer = answer(spec, addr, response);
                } catch (Throwable t) {
                    fail(spec, t, out);
                    return;
                }
                send(out, answer);
            }

            @Override
            public void operationFail(Throwable t) {
                directory.onFailure(addr, t);
                fail(spec, t, out);
            }
        };
    }

    /** The whole stream for a broker answer, built before anything is sent (a decode failure sends no message). */
    private List<PullMessageResponse> answer(Spec spec, String addr, RemotingCommand r) throws Exception {
        int code = r.getCode();
        if (code != ResponseCode.SUCCESS && code != ResponseCode.PULL_NOT_FOUND
            && code != ResponseCode.PULL_RETRY_IMMEDIATELY && code != ResponseCode.PULL_OFFSET_MOVED) {
            throw new MQBrokerException(code, r.getRemark(), addr);
        }
        PullMessageResponseHeader h = (PullMessageResponseHeader) r.decodeCommandCustomHeader(
            PullMessageResponseHeader.class);
        directory.suggest(spec.queue, h.getSuggestWhichBrokerId());
        long next = h.getNextBeginOffset();
        List<Pulled> found = List.of();
        Status status;
        if (code == ResponseCode.PULL_OFFSET_MOVED || h.getMinOffset() > spec.offset) {
            status = Statuses.of(Code.ILLEGAL_OFFSET, "offset " + spec.offset + " is outside what the broker holds ("
                + spec.queue + ", min offset " + h.getMinOffset() + ", max offset " + h.getMaxOffset() + ")");
        } else if (code == ResponseCode.SUCCESS) {
            List<Pulled> pulled = decode(spec, r.getBody(), h.getOffsetDelta());
            if (!pulled.isEmpty() && pulled.get(0).message.getQueueOffset() >= next) {
                // records of another commit-log file: the one under the consume queue is being deleted
                status = again(spec, "the broker answered offsets [" + spec.offset + ", " + next
                    + ") with a record of offset " + pulled.get(0).message.getQueueOffset());
                next = spec.offset;
            } else {
                found = filter(spec, pulled);
                status = Statuses.OK;
            }
        } else if (code == ResponseCode.PULL_RETRY_IMMEDIATELY && NO_MATCHED_MESSAGE.equals(r.getRemark())
            && next > spec.offset) {
            status = Statuses.OK; // the filter matched nothing in [offset, next)
        } else {
            status = again(spec, r.getRemark() + ", max offset " + h.getMaxOffset());
            next = spec.offset;
        }
        List<PullMessageResponse> out = new ArrayList<>();
        out.add(PullMessageResponse.newBuilder().setStatus(status).build());
        for (Pulled p : found) {
            out.add(PullMessageResponse.newBuilder()
                .setMessage(V2Messages.fromPulled(p.message, spec.topic, p.offsetMsgId)).build());
        }
        out.add(PullMessageResponse.newBuilder().setNextOffset(next).build());
        return out;
    }

    /** MESSAGE_NOT_FOUND: nothing to read at the offset now; the caller pulls the same offset again. */
    private static Status again(Spec spec, String why) {
        return Statuses.of(Code.MESSAGE_NOT_FOUND, "no message at offset " + spec.offset + " now (" + spec.queue
            + ": " + why + "); pull it again");
    }

    /** Decodes the pulled records in order; a record that cannot be decoded fails the pull (nothing is skipped). */
    private List<Pulled> decode(Spec spec, byte[] binary, Long offsetDelta) throws Exception {
        List<Pulled> out = new ArrayList<>();
        if (binary == null) {
            return out;
        }
        ByteBuffer buf = ByteBuffer.wrap(binary);
        long delta = offsetDelta == null ? 0 : offsetDelta;
        while (buf.hasRemaining()) {
            int at = buf.position();
            MessageExt m = MessageDecoder.decode(buf, true, false, true); // bodies decompressed below, bounded
            if (m == null) {
                throw new GatewayException(Code.INTERNAL_SERVER_ERROR, spec.describe() + ": the broker's record at byte "
                    + at + " of " + binary.length + " could not be decoded");
            }
            if (MessageSysFlag.check(m.getSysFlag(), MessageSysFlag.COMPRESSED_FLAG) && m.getBody() != null
                && m.getBody().length > 0) {
                m.setBody(Bodies.uncompress(m.getBody(), m.getSysFlag(), maxMessageBytes,
                    spec.queue + " offset " + (m.getQueueOffset() + delta)));
                m.setSysFlag(m.getSysFlag() & ~MessageSysFlag.COMPRESSED_FLAG);
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
