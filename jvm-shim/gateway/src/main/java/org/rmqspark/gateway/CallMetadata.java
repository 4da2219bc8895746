package org.rmqspark.gateway;

import io.grpc.Context;
import io.grpc.Contexts;
import io.grpc.Metadata;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;

/** Keeps the request metadata the methods read (the target broker of a send) in the call's context. */
final class CallMetadata implements ServerInterceptor {
    static final Metadata.Key<String> BROKER_NAME = Metadata.Key.of("x-mq-broker-name", Metadata.ASCII_STRING_MARSHALLER);
    private static final Context.Key<String> BROKER = Context.key("rmq-gateway-broker-name");

    @Override
    public <Q, R> ServerCall.Listener<Q> interceptCall(ServerCall<Q, R> call, Metadata headers,
                                                       ServerCallHandler<Q, R> next) {
        String broker = headers.get(BROKER_NAME);
        if (broker == null || broker.isBlank()) {
            return next.startCall(call, headers);
        }
        return Contexts.interceptCall(Context.current().withValue(BROKER, broker.trim()), call, headers, next);
    }

    /** The {@code x-mq-broker-name} of the current call, or null. */
    static String brokerName() {
        return BROKER.get();
    }
}
