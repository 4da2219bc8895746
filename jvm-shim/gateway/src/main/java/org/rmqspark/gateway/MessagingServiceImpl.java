package org.rmqspark.gateway;

import apache.rocketmq.v2.GetOffsetRequest;
import apache.rocketmq.v2.GetOffsetResponse;
import apache.rocketmq.v2.MessagingServiceGrpc;
import apache.rocketmq.v2.PullMessageRequest;
import apache.rocketmq.v2.PullMessageResponse;
import apache.rocketmq.v2.QueryOffsetRequest;
import apache.rocketmq.v2.QueryOffsetResponse;
import apache.rocketmq.v2.QueryRouteRequest;
import apache.rocketmq.v2.QueryRouteResponse;
import apache.rocketmq.v2.SendMessageRequest;
import apache.rocketmq.v2.SendMessageResponse;
import apache.rocketmq.v2.Status;
import apache.rocketmq.v2.UpdateOffsetRequest;
import apache.rocketmq.v2.UpdateOffsetResponse;
import io.grpc.stub.StreamObserver;

import java.util.function.Function;

/**
 * The six MessagingService methods the gateway serves; every other method keeps the generated UNIMPLEMENTED
 * answer. Each unary method checks the caller, runs its handler and answers any failure as the Status of its
 * response body (gRPC status OK).
 */
final class MessagingServiceImpl extends MessagingServiceGrpc.MessagingServiceImplBase {
    /** A handler step that may fail with any exception. */
    @FunctionalInterface
    private interface Call<R> {
        R run() throws Exception;
    }

    private final RouteHandler routes;
    private final OffsetHandler offsets;
    private final PullHandler pulls;
    private final SendHandler sends;
    private final BrokerDirectory directory;

    MessagingServiceImpl(RouteHandler routes, OffsetHandler offsets, PullHandler pulls, SendHandler sends,
                         BrokerDirectory directory) {
        this.routes = routes;
        this.offsets = offsets;
        this.pulls = pulls;
        this.sends = sends;
        this.directory = directory;
    }

    @Override
    public void queryRoute(QueryRouteRequest req, StreamObserver<QueryRouteResponse> out) {
        unary(out, "route of topic " + req.getTopic().getName(), null, () -> routes.queryRoute(req),
            s -> QueryRouteResponse.newBuilder().setStatus(s).build());
    }

    @Override
    public void queryOffset(QueryOffsetRequest req, StreamObserver<QueryOffsetResponse> out) {
        unary(out, "offset query (" + req.getQueryOffsetPolicy() + ") of " + describe(req.getMessageQueue()),
            req.getMessageQueue().getTopic().getName(), () -> offsets.queryOffset(req),
            s -> QueryOffsetResponse.newBuilder().setStatus(s).build());
    }

    @Override
    public void getOffset(GetOffsetRequest req, StreamObserver<GetOffsetResponse> out) {
        unary(out, "committed offset of group " + req.getGroup().getName() + " on " + describe(req.getMessageQueue()),
            req.getMessageQueue().getTopic().getName(), () -> offsets.getOffset(req),
            s -> GetOffsetResponse.newBuilder().setStatus(s).build());
    }

    @Override
    public void updateOffset(UpdateOffsetRequest req, StreamObserver<UpdateOffsetResponse> out) {
        unary(out, "offset update of group " + req.getGroup().getName() + " on " + describe(req.getMessageQueue()),
            req.getMessageQueue().getTopic().getName(), () -> offsets.updateOffset(req),
            s -> UpdateOffsetResponse.newBuilder().setStatus(s).build());
    }

    @Override
    public void sendMessage(SendMessageRequest req, StreamObserver<SendMessageResponse> out) {
        String topic = req.getMessagesCount() == 0 ? "" : req.getMessages(0).getTopic().getName();
        unary(out, "send of " + req.getMessagesCount() + " message(s) to topic " + topic, topic,
            () -> sends.send(req), s -> SendMessageResponse.newBuilder().setStatus(s).build());
    }

    @Override
    public void pullMessage(PullMessageRequest req, StreamObserver<PullMessageResponse> out) {
        pulls.pull(req, out);
    }

    private static String describe(apache.rocketmq.v2.MessageQueue mq) {
        return "topic " + mq.getTopic().getName() + ", " + mq.getBroker().getName() + " queue " + mq.getId();
    }

    private <R> void unary(StreamObserver<R> out, String what, String topic, Call<R> call,
                           Function<Status, R> failure) {
        R response;
        try {
            response = call.run(); // each handler authorizes its caller (CallerAuth.require)
        } catch (Throwable t) {
            Status s = Statuses.of(t, what);
            if (topic != null && s.getCode() == apache.rocketmq.v2.Code.PROXY_TIMEOUT) {
                directory.invalidate(topic);
            }
            response = failure.apply(s);
        }
        try {
            out.onNext(response);
            out.onCompleted();
        } catch (RuntimeException e) {
            // the caller went away meanwhile: nobody to answer
        }
    }
}
