"""A RocketMQ pull client in plain Python: routes, offsets, exact range reads, consumer offsets, sends."""
from rmq_spark.client.errors import (AuthError, BrokerBusyError, BrokerError, BrokerUnavailableError,
                                     ConnectionLostError, DataLossError, InvalidFilterError, MessageTooLargeError,
                                     OffsetMovedError, ProtocolError, RequestTimeoutError, RocketMQError,
                                     TopicNotFoundError, UnsupportedError)
from rmq_spark.client.grpc.client import GrpcClient
from rmq_spark.client.model import (EVERY_MESSAGE, Credentials, FilterExpression, HalfMessage, Message, MessageQueue,
                                    OutgoingMessage, PullResult, PullStatus, SendResult, TopicRoute)
from rmq_spark.client.remoting.client import RemotingClient
from rmq_spark.client.tls import TlsConfig

__all__ = [
    "EVERY_MESSAGE", "AuthError", "BrokerBusyError", "BrokerError", "BrokerUnavailableError", "ConnectionLostError",
    "Credentials", "DataLossError", "FilterExpression", "GrpcClient", "HalfMessage", "InvalidFilterError", "Message",
    "MessageQueue", "MessageTooLargeError", "OffsetMovedError", "OutgoingMessage", "ProtocolError", "PullResult", "PullStatus", "RemotingClient",
    "RequestTimeoutError", "RocketMQError", "SendResult", "TlsConfig", "TopicNotFoundError", "TopicRoute",
    "UnsupportedError",
]
