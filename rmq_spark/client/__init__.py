"""A RocketMQ pull client in plain Python: routes, offsets, exact range reads, consumer offsets, sends."""
from rmq_spark.client.compression import MessageTooLargeError
from rmq_spark.client.errors import (AuthError, BrokerBusyError, BrokerError, BrokerUnavailableError,
                                     ConnectionLostError, DataLossError, InvalidFilterError, OffsetMovedError,
                                     ProtocolError, RequestTimeoutError, RocketMQError, TopicNotFoundError,
                                     UnsupportedError)
from rmq_spark.client.grpc.client import GrpcClient
from rmq_spark.client.model import Message, MessageQueue, PullResult, PullStatus, SendResult, TopicRoute
from rmq_spark.client.remoting.acl import Credentials
from rmq_spark.client.remoting.client import RemotingClient
from rmq_spark.client.remoting.message_codec import OutgoingMessage
from rmq_spark.client.tls import TlsConfig

__all__ = [
    "AuthError", "BrokerBusyError", "BrokerError", "BrokerUnavailableError", "ConnectionLostError", "Credentials",
    "DataLossError", "GrpcClient", "InvalidFilterError", "Message", "MessageQueue", "MessageTooLargeError",
    "OffsetMovedError", "OutgoingMessage", "ProtocolError", "PullResult", "PullStatus", "RemotingClient",
    "RequestTimeoutError", "RocketMQError", "SendResult", "TlsConfig", "TopicNotFoundError", "TopicRoute",
    "UnsupportedError",
]
