package org.rmqspark.gateway;

import io.grpc.Context;
import io.grpc.Contexts;
import io.grpc.Metadata;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import org.apache.rocketmq.remoting.protocol.NamespaceUtil;

/**
 * Keeps the request metadata the methods read in the call's context: the target broker of a send, and the
 * namespace the call's topics and groups are in.
 */
final class CallMetadata implements ServerInterceptor {
    static final Metadata.Key<String> BROKER_NAME = Metadata.Key.of("x-mq-broker-name", Metadata.ASCII_STRING_MARSHALLER);
    static final Metadata.Key<String> NAMESPACE = Metadata.Key.of("x-mq-namespace", Metadata.ASCII_STRING_MARSHALLER);
    private static final Context.Key<String> BROKER = Context.key("rmq-gateway-broker-name");
    private static final Context.Key<String> NAMESPACE_KEY = Context.key("rmq-gateway-namespace");

    @Override
    public <Q, R> ServerCall.Listener<Q> interceptCall(ServerCall<Q, R> call, Metadata headers,
                                                       ServerCallHandler<Q, R> next) {
        String broker = headers.get(BROKER_NAME);
        String namespace = headers.get(NAMESPACE);
        Context context = Context.current();
        if (broker != null && !broker.isBlank()) {
            context = context.withValue(BROKER, broker.trim());
        }
        if (namespace != null && !namespace.isBlank()) {
            context = context.withValue(NAMESPACE_KEY, namespace.trim());
        }
        return context == Context.current() ? next.startCall(call, headers)
            : Contexts.interceptCall(context, call, headers, next);
    }

    /** The {@code x-mq-broker-name} of the current call, or null. */
    static String brokerName() {
        return BROKER.get();
    }

    /** A topic or group of the current call as the brokers know it: in its {@code x-mq-namespace}, if any. */
    static String wrap(String resource) {
        return NamespaceUtil.wrapNamespace(NAMESPACE_KEY.get(), resource);
    }

    /** A topic as the current call knows it: without its namespace. */
    static String unwrap(String resource) {
        return NamespaceUtil.withoutNamespace(resource, NAMESPACE_KEY.get());
    }
}
