package org.rmqspark.shim;

import com.google.gson.JsonObject;
import org.apache.rocketmq.remoting.RPCHook;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;

import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;

/**
 * Counts the requests every broker of the cluster receives, by request code (an RPC hook on each broker's remoting
 * servers): what a client costs the brokers, measured where they pay it (the scale benchmark reads it).
 */
final class RequestCounter implements RPCHook {
    static final RequestCounter INSTANCE = new RequestCounter();

    private final Map<Integer, LongAdder> counts = new ConcurrentHashMap<>();

    private RequestCounter() {
    }

    @Override
    public void doBeforeRequest(String remoteAddr, RemotingCommand request) {
        counts.computeIfAbsent(request.getCode(), k -> new LongAdder()).increment();
    }

    @Override
    public void doAfterResponse(String remoteAddr, RemotingCommand request, RemotingCommand response) {
    }

    /** The requests received so far by every broker, by request code. */
    JsonObject snapshot() {
        JsonObject out = new JsonObject();
        for (Map.Entry<Integer, LongAdder> e : new TreeMap<>(counts).entrySet()) {
            out.addProperty(Integer.toString(e.getKey()), e.getValue().sum());
        }
        return out;
    }
}
