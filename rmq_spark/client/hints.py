"""The fix each kind of failure suggests, worded once for every transport."""

TOPIC = "check the topic name, or create the topic"
# What keeps an election from cutting a queue's tail (the data-loss texts of the source and the sink)
HA_PREVENTION = (
    "allAckInSyncStateSet=true on the brokers of a RocketMQ 5 Controller-mode group, or brokerRole=SYNC_MASTER on "
    "4.x master-slave groups, makes every acknowledged message a replica's too"
)
AUTH = "check accessKey/secretKey and the user's permissions on the broker"
UNKNOWN_USER = "the accessKey is not a user of this cluster: check accessKey"
GROUP = (
    "the consumer group does not exist on the broker: create it (mqadmin updateSubGroup) or enable "
    "autoCreateSubscriptionGroup"
)
FILTER = "check subExpression and expressionType"
NOT_REMOTING = "the server does not support this request; check the address points at a RocketMQ name server or broker"
NO_PULL_API = (
    "this server has no pull API: it is not an rmq-spark pull gateway (the stock RocketMQ proxy "
    "implements only the push and simple consumer calls of apache.rocketmq.v2, not PullMessage, "
    "UpdateOffset, GetOffset or QueryOffset). Read over the remoting protocol with option nameServer set "
    "to the cluster's name servers, or run the pull gateway beside the cluster (jvm-shim/gateway/README.md) and "
    "point option endpoint at it"
)
NOT_GRPC = (
    "check that endpoint is the host:port of a RocketMQ v2 gRPC pull gateway and that it is up; a name "
    "server or broker address goes in option nameServer instead"
)
TLS_SERVER = (
    "the server's TLS certificate was not accepted: set tlsCaFile to the CA that signed it, and "
    "tlsServerName if it names another host"
)
TLS_CLIENT = (
    "the server refused this client's TLS certificate (none was given, or no CA it trusts signed it): "
    "set tlsCertFile and tlsKeyFile"
)
# A TLS connection the server closed before answering anything: how a server refuses a client certificate when the
# refusal's alert does not reach the client
TLS_CLOSED = (
    "the server closed the TLS connection before answering anything, as a server that requires client certificates "
    "does when it refused this client's TLS certificate (none was given, or no CA it trusts signed it): set "
    "tlsCertFile and tlsKeyFile"
)
TLS_FILES = (
    "gRPC could not set up TLS from the certificates: check that tlsCaFile, tlsCertFile and tlsKeyFile "
    "hold PEM and that the key is the certificate's"
)
BUSY = (
    "the broker asked to back off (busy, flow control, or starting / stopping); try again in a moment (range "
    "reads retry it with backoff up to brokerRetryTimeoutMs)"
)
TOO_LARGE = (
    "the broker refused the message as too large or malformed: a body must fit the broker's "
    "maxMessageSize (4 MiB by default) and the properties 32 KiB; split the body or raise maxMessageSize on "
    "the brokers"
)
NOT_LEADER = (
    "another broker group leads this logic queue of a static topic now (it was remapped): the route is "
    "read again and the request retried with its new leader"
)
STATIC_RECORDS = (
    "a static topic (RocketMQ 5 logic queues): a streaming exactly_once write keeps its commit records "
    "by broker queue, which a static topic's logic queues are not; write it at_least_once, or "
    "exactly_once from a batch (df.write)"
)
FORWARD = (
    "the broker group that leads this logic queue of a static topic cannot reach the group that holds its "
    "older messages now (brokers learn the cluster's addresses every 5 s); retried until brokerRetryTimeoutMs"
)
LITE_TOPIC = (
    "a LiteTopic (message.type=LITE, RocketMQ 5.5): its messages are kept per lite topic and taken by lite "
    "subscriptions, not read or written by queue offset, which is how rmq-spark reads and writes; consume "
    "it with RocketMQ 5.5's LiteTopic consumers, or use a topic of another message.type"
)
TIMER_OFF = "the broker does not deliver timer messages: enable timerWheelEnable on the brokers, or drop deliverTimeMs"
MESSAGE_TYPE = (
    "the topic's message.type does not take this kind of message (RocketMQ 5's proxy checks it): rows with "
    "a shardingKey are FIFO, rows with a deliverTimeMs DELAY, others NORMAL; create the topic with that "
    "message.type or MIXED, or write rows of the topic's type"
)
