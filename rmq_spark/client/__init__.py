"""A RocketMQ pull client in plain Python: routes, offsets, exact range reads, consumer offsets, sends."""
from rmq_spark.client.errors import (AuthError, BrokerError, ConnectionLostError, DataLossError, OffsetMovedError,
                                     ProtocolError, RequestTimeoutError, RocketMQError, TopicNotFoundError)
from rmq_spark.client.grpc.client import GrpcClient
from rmq_spark.client.model import Message, MessageQueue, PullResult, PullStatus, SendResult, TopicRoute
from rmq_spark.client.remoting.acl import Credentials
from rmq_spark.client.remoting.client import RemotingClient
from rmq_spark.client.remoting.message_codec import OutgoingMessage

__all__ = [
    "AuthError", "BrokerError", "ConnectionLostError", "Credentials", "DataLossError", "GrpcClient", "Message",
    "MessageQueue",
    "OffsetMovedError", "OutgoingMessage", "ProtocolError", "PullResult", "PullStatus", "RemotingClient",
    "RequestTimeoutError", "RocketMQError", "SendResult", "TopicNotFoundError", "TopicRoute",
]
