"""Whether the servers of a topic end transactions: asked before an exactly-once write sends its first half message,
since a server that answers END_TRANSACTION without ending anything would leave every row uncommitted."""

from __future__ import annotations

from rmq_spark.client.base import BaseClient
from rmq_spark.client.defaults import DEFAULT_RETRY_TIMEOUT
from rmq_spark.client.errors import RETRYABLE, BrokerError, BrokerUnavailableError
from rmq_spark.client.model import HalfMessage, MessageQueue
from rmq_spark.client.remoting import codes
from rmq_spark.options import OptionError
from rmq_spark.sink.retry import Retries

ABSENT_OFFSET = 1 << 62  # a commit-log offset no broker has (an exabyte into its commit log)
_FIX = (
    "Write with deliveryGuarantee=at_least_once, or point nameServer at the cluster's name servers (the brokers "
    "must then be reachable from Spark's driver and executors)"
)


def refuse_unended_transactions(
    client: BaseClient, topic: str, group: str, retry_timeout: float = DEFAULT_RETRY_TIMEOUT
) -> None:
    """OptionError when a master of ``topic`` does not end transactions. Each is asked to roll back a half message
    that cannot exist: a broker looks it up and answers an error; the RocketMQ 5 proxy's remoting port answers
    SUCCESS to every END_TRANSACTION, and forwards none for halves sent over remoting (it keeps transactions only of
    its gRPC clients). A group the route lists no master of now is not asked. No answer, or a busy one, tells
    nothing: taken for a broker's, it would leave every half behind a proxy unended. Such a master is asked again
    with backoff for up to ``retry_timeout`` seconds (option brokerRetryTimeoutMs), then the write fails naming it."""
    asked: set[str] = set()
    route = client.route(topic)
    for mq in route.write_queues():
        members = route.broker(mq.broker_name)
        address = members.master_address if members is not None else None
        if address is None or address in asked:
            continue
        asked.add(address)
        _probe(client, mq, address, group, Retries(retry_timeout))


def _probe(client: BaseClient, mq: MessageQueue, address: str, group: str, retries: Retries) -> None:
    """Ask the master of ``mq`` (at ``address``) to roll back a half that cannot exist until it answers, and judge
    the answer."""
    probe = HalfMessage(queue=mq, msg_id="", transaction_id="", commit_log_offset=ABSENT_OFFSET, half_queue_offset=0)
    what = f"END_TRANSACTION to {address} (broker group {mq.broker_name}), asked before an exactly_once write"
    while True:
        try:
            client.end_transaction_async(probe, commit=False, group=group).result()
        except BrokerUnavailableError:
            return  # its group left the route, or has no master now: away, as a group the route had no master of
        except RETRYABLE as e:
            try:
                retries.wait(e, what)
            except RETRYABLE as gave_up:
                raise type(gave_up)(
                    f"{gave_up.args[0]}. Whether {address} ends transactions cannot be told without its answer "
                    "(RocketMQ 5's proxy answers END_TRANSACTION without ending any): make sure it is up, reachable "
                    "and not overloaded, or raise option brokerRetryTimeoutMs, or write with "
                    "deliveryGuarantee=at_least_once"
                ) from gave_up
            continue
        except BrokerError as e:
            if e.code != codes.REQUEST_CODE_NOT_SUPPORTED:
                return  # it looked the half up: it ends transactions
            raise OptionError(
                f"deliveryGuarantee=exactly_once cannot write to topic {mq.topic!r} through {address} "
                f"(broker group {mq.broker_name}): it does not serve END_TRANSACTION, which commits "
                f"the half messages. {_FIX}"
            ) from None
        raise OptionError(
            f"deliveryGuarantee=exactly_once cannot write to topic {mq.topic!r} through {address} (broker group "
            f"{mq.broker_name}): it answered SUCCESS to END_TRANSACTION of a half message that does not exist, so it "
            "ends no transaction. This is a RocketMQ 5 proxy's remoting port: it answers END_TRANSACTION without "
            "forwarding it for half messages sent over remoting, and has no UPDATE_AND_CREATE_TOPIC for the commit "
            f"records of a streaming query. {_FIX}"
        )
