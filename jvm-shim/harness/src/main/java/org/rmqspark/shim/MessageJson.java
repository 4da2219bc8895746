package org.rmqspark.shim;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageClientExt;
import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageExt;

import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/** Conversions between the protocol's JSON and RocketMQ messages. */
final class MessageJson {
    private MessageJson() {
    }

    /** A message from {body?|bodyBase64?, tags?, keys?: [..]|string, properties?: {k: v}}. */
    static Message toMessage(String topic, JsonObject m) {
        Message msg = new Message();
        msg.setTopic(topic);
        byte[] body;
        if (m.has("bodyBase64") && !m.get("bodyBase64").isJsonNull()) {
            body = Base64.getDecoder().decode(m.get("bodyBase64").getAsString());
        } else if (m.has("body") && !m.get("body").isJsonNull()) {
            body = m.get("body").getAsString().getBytes(StandardCharsets.UTF_8);
        } else {
            body = new byte[0];
        }
        msg.setBody(body);
        if (m.has("tags") && !m.get("tags").isJsonNull()) {
            msg.setTags(m.get("tags").getAsString());
        }
        if (m.has("keys") && !m.get("keys").isJsonNull()) {
            JsonElement k = m.get("keys");
            if (k.isJsonArray()) {
                List<String> keys = new ArrayList<>();
                for (JsonElement e : k.getAsJsonArray()) {
                    keys.add(e.getAsString());
                }
                msg.setKeys(keys);
            } else {
                msg.setKeys(k.getAsString());
            }
        }
        if (m.has("properties") && m.get("properties").isJsonObject()) {
            for (Map.Entry<String, JsonElement> e : m.getAsJsonObject("properties").entrySet()) {
                msg.putUserProperty(e.getKey(), e.getValue().isJsonNull() ? "" : e.getValue().getAsString());
            }
        }
        return msg;
    }

    /** {msgId, offsetMsgId, brokerName, queueId, queueOffset} of a single send. */
    static JsonObject sendResult(SendResult r) {
        return sendResult(r.getMsgId(), r.getOffsetMsgId(), r, r.getQueueOffset());
    }

    /** Per-message results of one batch send: ids split from the comma-joined lists, consecutive queue offsets. */
    static List<JsonObject> batchResults(SendResult r, int count) {
        String[] ids = r.getMsgId() == null ? new String[0] : r.getMsgId().split(",");
        String[] offsetIds = r.getOffsetMsgId() == null ? new String[0] : r.getOffsetMsgId().split(",");
        List<JsonObject> out = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            String id = i < ids.length ? ids[i] : null;
            String offId = i < offsetIds.length ? offsetIds[i] : null;
            out.add(sendResult(id, offId, r, r.getQueueOffset() + i));
        }
        return out;
    }

    private static JsonObject sendResult(String msgId, String offsetMsgId, SendResult r, long queueOffset) {
        JsonObject o = new JsonObject();
        o.addProperty("msgId", msgId);
        o.addProperty("offsetMsgId", offsetMsgId);
        o.addProperty("brokerName", r.getMessageQueue().getBrokerName());
        o.addProperty("queueId", r.getMessageQueue().getQueueId());
        o.addProperty("queueOffset", queueOffset);
        o.addProperty("sendStatus", r.getSendStatus().name());
        return o;
    }

    /** Every field the Java client exposes on a consumed MessageExt (body already decompressed by the client). */
    static JsonObject fromMessageExt(MessageExt m) {
        JsonObject o = new JsonObject();
        o.addProperty("topic", m.getTopic());
        o.addProperty("brokerName", m.getBrokerName());
        o.addProperty("queueId", m.getQueueId());
        o.addProperty("queueOffset", m.getQueueOffset());
        o.addProperty("msgId", m.getMsgId());
        String offsetMsgId = (m instanceof MessageClientExt) ? ((MessageClientExt) m).getOffsetMsgId() : null;
        if (offsetMsgId == null && m.getStoreHost() != null) {
            offsetMsgId = MessageDecoder.createMessageId(m.getStoreHost(), m.getCommitLogOffset());
        }
        o.addProperty("offsetMsgId", offsetMsgId);
        o.addProperty("tags", m.getTags());
        o.addProperty("keys", m.getKeys());
        byte[] body = m.getBody() == null ? new byte[0] : m.getBody();
        o.addProperty("bodyBase64", Base64.getEncoder().encodeToString(body));
        o.addProperty("bornTimestamp", m.getBornTimestamp());
        o.addProperty("storeTimestamp", m.getStoreTimestamp());
        o.addProperty("bornHost", hostPort(m.getBornHost()));
        o.addProperty("storeHost", hostPort(m.getStoreHost()));
        o.addProperty("reconsumeTimes", m.getReconsumeTimes());
        o.addProperty("flag", m.getFlag());
        o.addProperty("sysFlag", m.getSysFlag());
        o.addProperty("bodyCRC", m.getBodyCRC());
        o.addProperty("storeSize", m.getStoreSize());
        o.addProperty("commitLogOffset", m.getCommitLogOffset());
        JsonObject props = new JsonObject();
        if (m.getProperties() != null) {
            for (Map.Entry<String, String> e : new TreeMap<>(m.getProperties()).entrySet()) {
                props.addProperty(e.getKey(), e.getValue());
            }
        }
        o.add("properties", props);
        return o;
    }

    static String hostPort(SocketAddress a) {
        if (a == null) {
            return null;
        }
        if (a instanceof InetSocketAddress) {
            InetSocketAddress i = (InetSocketAddress) a;
            String host = i.getAddress() != null ? i.getAddress().getHostAddress() : i.getHostString();
            return host + ":" + i.getPort();
        }
        return a.toString();
    }

    static JsonArray array(List<JsonObject> list) {
        JsonArray a = new JsonArray();
        list.forEach(a::add);
        return a;
    }
}
