"""The exactly-once write's check that a topic's masters end transactions: an answer that tells nothing (a timeout,
a busy server) is asked again, never taken for a broker's."""

from __future__ import annotations

import time

import pytest

from rmq_spark.client.errors import BrokerBusyError
from rmq_spark.client.model import OutgoingMessage
from rmq_spark.client.remoting import codes
from rmq_spark.client.remoting.client import RemotingClient
from rmq_spark.client.remoting.frame import RemotingCommand
from rmq_spark.options import OptionError
from rmq_spark.sink.message_types import TopicTypes
from rmq_spark.sink.transaction_check import refuse_unended_transactions
from tests.support.scripted_remoting import ScriptedRemoting

BUSY = RemotingCommand(code=codes.SYSTEM_BUSY, remark="[PCBUSY_CLEAN_QUEUE]broker busy")
PROXY = RemotingCommand(code=codes.SUCCESS)  # RocketMQ 5's proxy: SUCCESS to every END_TRANSACTION
BROKER = RemotingCommand(code=codes.SYSTEM_ERROR, remark="Find prepared transaction message failed")
# GET_TOPIC_CONFIG answered as a 4.x broker does: no message.type, nothing to check there
NO_TOPIC_CONFIG = RemotingCommand(code=codes.REQUEST_CODE_NOT_SUPPORTED, remark="request type 351 not supported")


class Answers(dict):
    """The scripted peer's fixed answers, END_TRANSACTION's taken in turn from a list (the last one kept)."""

    def __init__(self, end_transaction: list[RemotingCommand]) -> None:
        super().__init__({codes.END_TRANSACTION: end_transaction[-1], codes.GET_TOPIC_CONFIG: NO_TOPIC_CONFIG})
        self._turns = list(end_transaction)

    def __getitem__(self, code: int) -> RemotingCommand:
        if code == codes.END_TRANSACTION and len(self._turns) > 1:
            return self._turns.pop(0)
        return super().__getitem__(code)


def scripted(*end_transaction: RemotingCommand, peer: type[ScriptedRemoting] = ScriptedRemoting) -> ScriptedRemoting:
    """A scripted name server and broker whose END_TRANSACTION answers are ``end_transaction`` in turn."""
    server = peer(None)
    server.fixed = Answers(list(end_transaction))
    return server


def test_a_proxy_that_was_busy_at_first_is_still_found_out():
    with (
        scripted(BUSY, BUSY, PROXY) as peer,
        RemotingClient(peer.address, request_timeout=5) as client,
    ):
        with pytest.raises(OptionError, match=r"answered SUCCESS.*RocketMQ 5 proxy"):
            refuse_unended_transactions(client, "T", "pg")
        assert peer.asked[codes.END_TRANSACTION] == 3


class LateAtFirst(ScriptedRemoting):
    """Answers the first END_TRANSACTION a second late: past the client's request timeout."""

    def _answer(self, request: RemotingCommand) -> RemotingCommand | None:
        if request.code == codes.END_TRANSACTION and not self.asked[codes.END_TRANSACTION]:
            time.sleep(1)
        return super()._answer(request)


def test_a_proxy_that_did_not_answer_in_time_at_first_is_still_found_out():
    with (
        scripted(PROXY, peer=LateAtFirst) as peer,
        RemotingClient(peer.address, request_timeout=0.3) as client,
    ):
        with pytest.raises(OptionError, match=r"answered SUCCESS.*RocketMQ 5 proxy"):
            refuse_unended_transactions(client, "T", "pg")
        assert peer.asked[codes.END_TRANSACTION] >= 2


def test_a_server_busy_past_brokerRetryTimeoutMs_fails_the_write_naming_it_and_the_fix():
    with (
        scripted(BUSY) as peer,
        RemotingClient(peer.address, request_timeout=5) as client,
    ):
        with pytest.raises(BrokerBusyError) as raised:
            refuse_unended_transactions(client, "T", "pg", retry_timeout=0.3)
        message = str(raised.value)
        assert peer.address in message and "brokerRetryTimeoutMs" in message and "at_least_once" in message
        assert peer.asked[codes.END_TRANSACTION] > 1


def test_a_task_takes_no_answer_that_told_nothing_for_a_brokers():
    with (
        scripted(BUSY, PROXY) as peer,
        RemotingClient(peer.address, request_timeout=5) as client,
    ):
        with pytest.raises(OptionError, match=r"RocketMQ 5 proxy"):
            TopicTypes(client, transactional=True, group="pg").check("T", OutgoingMessage(b"x"))


def test_a_task_does_not_keep_a_check_that_gave_up():
    """A topic whose check gave up is checked again at its next row, and then found out."""
    with (
        scripted(BUSY, BUSY, BUSY, BUSY, PROXY) as peer,
        RemotingClient(peer.address, request_timeout=5) as client,
    ):
        types = TopicTypes(client, transactional=True, group="pg", retry_timeout=0.1)
        with pytest.raises(BrokerBusyError):
            types.check("T", OutgoingMessage(b"x"))
        with pytest.raises(OptionError, match=r"RocketMQ 5 proxy"):
            types.check("T", OutgoingMessage(b"x"))


def test_a_broker_that_was_busy_at_first_is_taken_once_it_answers():
    with (
        scripted(BUSY, BROKER) as peer,
        RemotingClient(peer.address, request_timeout=5) as client,
    ):
        refuse_unended_transactions(client, "T", "pg")
        assert peer.asked[codes.END_TRANSACTION] == 2
