package org.rmqspark.gateway;

import apache.rocketmq.v2.Encoding;
import apache.rocketmq.v2.Message;
import apache.rocketmq.v2.MessageType;
import apache.rocketmq.v2.Resource;
import apache.rocketmq.v2.SystemProperties;
import com.google.protobuf.ByteString;
import com.google.protobuf.Timestamp;
import org.apache.rocketmq.common.message.MessageAccessor;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageExt;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Conversion between RocketMQ messages and v2 {@link Message}s. A pulled message keeps every stored property in
 * {@code user_properties} (system ones included) so that both transports give the same rows; its remoting
 * {@code flag} travels as the user property {@value #FLAG_PROPERTY} when it is not 0.
 */
final class V2Messages {
    static final String FLAG_PROPERTY = "__rmq_spark_flag";
    private static final String KEY_SEPARATOR = MessageConst.KEY_SEPARATOR;

    private V2Messages() {
    }

    /**
     * A pulled message of {@code topic} (as the caller names it) as v2 {@code Message}. {@code offsetMsgId} is the
     * broker's store-position id of its record, the message id when it has no UNIQ_KEY.
     */
    static Message fromPulled(MessageExt m, String topic, String offsetMsgId) {
        Map<String, String> props = m.getProperties();
        SystemProperties.Builder sp = SystemProperties.newBuilder()
            .setBodyEncoding(Encoding.IDENTITY)
            .setMessageType(MessageType.NORMAL)
            .setQueueId(m.getQueueId())
            .setQueueOffset(m.getQueueOffset())
            .setBornTimestamp(timestamp(m.getBornTimestamp()))
            .setStoreTimestamp(timestamp(m.getStoreTimestamp()))
            .setDeliveryAttempt(m.getReconsumeTimes() + 1);
        String bornHost = HostPort.render(m.getBornHost());
        if (bornHost != null) {
            sp.setBornHost(bornHost);
        }
        String storeHost = HostPort.render(m.getStoreHost());
        if (storeHost != null) {
            sp.setStoreHost(storeHost);
        }
        String uniqKey = props == null ? null : props.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX);
        String messageId = uniqKey != null ? uniqKey : offsetMsgId;
        if (messageId != null) {
            sp.setMessageId(messageId);
        }
        String tags = props == null ? null : props.get(MessageConst.PROPERTY_TAGS);
        if (tags != null) {
            sp.setTag(tags);
        }
        String keys = props == null ? null : props.get(MessageConst.PROPERTY_KEYS);
        if (keys != null) {
            for (String k : keys.split(KEY_SEPARATOR)) {
                if (!k.isEmpty()) {
                    sp.addKeys(k);
                }
            }
        }
        Message.Builder b = Message.newBuilder()
            .setTopic(Resource.newBuilder().setName(topic))
            .setSystemProperties(sp);
        if (props != null) {
            b.putAllUserProperties(props);
        }
        if (m.getFlag() != 0) {
            b.putUserProperties(FLAG_PROPERTY, Integer.toString(m.getFlag()));
        }
        if (m.getBody() != null) {
            b.setBody(ByteString.copyFrom(m.getBody()));
        }
        return b.build();
    }

    /**
     * A v2 message to send as a RocketMQ message of {@code topic}. User properties are taken as they are (system
     * names too, as the remoting path sends them); tag, keys and message id from the system properties win;
     * {@value #FLAG_PROPERTY} becomes the flag.
     */
    static org.apache.rocketmq.common.message.Message toSend(Message v2, String topic, int maxBytes) {
        org.apache.rocketmq.common.message.Message m = new org.apache.rocketmq.common.message.Message();
        m.setTopic(topic);
        m.setBody(body(v2, maxBytes));
        for (Map.Entry<String, String> e : v2.getUserPropertiesMap().entrySet()) {
            if (FLAG_PROPERTY.equals(e.getKey())) {
                try {
                    m.setFlag(Integer.parseInt(e.getValue()));
                } catch (NumberFormatException ex) {
                    throw GatewayException.badRequest("user property " + FLAG_PROPERTY + " must be an int32, not "
                        + e.getValue());
                }
                continue;
            }
            if (e.getKey().isEmpty()) {
                throw GatewayException.badRequest("a user property has an empty name");
            }
            MessageAccessor.putProperty(m, e.getKey(), e.getValue());
        }
        SystemProperties sp = v2.getSystemProperties();
        if (sp.hasTag() && !sp.getTag().isEmpty()) {
            m.setTags(sp.getTag());
        }
        List<String> keys = new ArrayList<>();
        for (String k : sp.getKeysList()) {
            if (!k.isEmpty()) {
                keys.add(k);
            }
        }
        if (!keys.isEmpty()) {
            m.setKeys(keys);
        }
        if (!sp.getMessageId().isEmpty()) {
            MessageAccessor.putProperty(m, MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, sp.getMessageId());
        }
        if (sp.hasDeliveryTimestamp()) {  // a timer message, as the proxy sends one
            Timestamp at = sp.getDeliveryTimestamp();
            m.setDeliverTimeMs(at.getSeconds() * 1000 + at.getNanos() / 1_000_000);
        }
        if (sp.hasMessageGroup() && !sp.getMessageGroup().isEmpty()) {  // the group FIFO consumers order by
            MessageAccessor.putProperty(m, MessageConst.PROPERTY_SHARDING_KEY, sp.getMessageGroup());
        }
        return m;
    }

    private static byte[] body(Message v2, int maxBytes) {
        Encoding enc = v2.getSystemProperties().getBodyEncoding();
        if (enc == Encoding.GZIP) {
            return Bodies.gunzip(v2.getBody().toByteArray(), maxBytes, "a message to topic " + v2.getTopic().getName());
        }
        if (enc != Encoding.IDENTITY && enc != Encoding.ENCODING_UNSPECIFIED) {
            throw GatewayException.badRequest("unsupported body_encoding " + enc);
        }
        return v2.getBody().toByteArray();
    }

    /** Milliseconds since the epoch as a protobuf Timestamp (exact to the millisecond). */
    static Timestamp timestamp(long millis) {
        return Timestamp.newBuilder()
            .setSeconds(Math.floorDiv(millis, 1000L))
            .setNanos((int) Math.floorMod(millis, 1000L) * 1_000_000)
            .build();
    }

    /** A protobuf Timestamp as milliseconds since the epoch (sub-millisecond part dropped). */
    static long millis(Timestamp t) {
        return Math.addExact(Math.multiplyExact(t.getSeconds(), 1000L), t.getNanos() / 1_000_000);
    }
}
