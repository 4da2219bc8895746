"""Whether the servers of a topic end transactions: asked before an exactly-once write sends its first half message,
since a server that answers END_TRANSACTION without ending anything would leave every row uncommitted."""

from __future__ import annotations

from rmq_spark.client.base import BaseClient
from rmq_spark.client.errors import RETRYABLE, BrokerError
from rmq_spark.client.model import HalfMessage
from rmq_spark.client.remoting import codes
from rmq_spark.options import OptionError

ABSENT_OFFSET = 1 << 62  # a commit-log offset no broker has (an exabyte into its commit log)
_FIX = (
    "Write with deliveryGuarantee=at_least_once, or point nameServer at the cluster's name servers (the brokers "
    "must then be reachable from Spark's driver and executors)"
)


def refuse_unended_transactions(client: BaseClient, topic: str, group: str) -> None:
    """OptionError when a master of ``topic`` does not end transactions. Each is asked to roll back a half message
    that cannot exist: a broker looks it up and answers an error; the RocketMQ 5 proxy's remoting port answers
    SUCCESS to every END_TRANSACTION, and forwards none for halves sent over remoting (it keeps transactions only of
    its gRPC clients). A master that is away now is not asked."""
    asked: set[str] = set()
    route = client.route(topic)
    for mq in route.write_queues():
        members = route.broker(mq.broker_name)
        address = members.master_address if members is not None else None
        if address is None or address in asked:
            continue
        asked.add(address)
        probe = HalfMessage(
            queue=mq, msg_id="", transaction_id="", commit_log_offset=ABSENT_OFFSET, half_queue_offset=0
        )
        try:
            client.end_transaction_async(probe, commit=False, group=group).result()
        except RETRYABLE:
            continue
        except BrokerError as e:
            if e.code != codes.REQUEST_CODE_NOT_SUPPORTED:
                continue  # it looked the half up: it ends transactions
            raise OptionError(
                f"deliveryGuarantee=exactly_once cannot write to topic {topic!r} through {address} "
                f"(broker group {mq.broker_name}): it does not serve END_TRANSACTION, which commits "
                f"the half messages. {_FIX}"
            ) from None
        raise OptionError(
            f"deliveryGuarantee=exactly_once cannot write to topic {topic!r} through {address} (broker group "
            f"{mq.broker_name}): it answered SUCCESS to END_TRANSACTION of a half message that does not exist, so it "
            "ends no transaction. This is a RocketMQ 5 proxy's remoting port: it answers END_TRANSACTION without "
            "forwarding it for half messages sent over remoting, and has no UPDATE_AND_CREATE_TOPIC for the commit "
            f"records of a streaming query. {_FIX}"
        )
