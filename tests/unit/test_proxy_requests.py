"""What the RocketMQ 5 proxy's remoting port needs of each request: the broker group's name (``bname``, or ``n`` in a
send's header), by which it forwards the request to that group's master (AbstractRemotingActivity)."""

from __future__ import annotations

import pytest

from rmq_spark.client.errors import MessageRejectedError, UnsupportedError
from rmq_spark.client.model import FilterExpression, MessageQueue, OutgoingMessage
from rmq_spark.client.remoting import broker as req
from rmq_spark.client.remoting import codes
from rmq_spark.client.remoting.client import RemotingClient
from rmq_spark.client.remoting.frame import RemotingCommand
from rmq_spark.client.remoting.status import error_for
from rmq_spark.options import OptionError
from rmq_spark.sink.message_types import TopicTypes
from rmq_spark.sink.transaction_check import refuse_unended_transactions
from tests.support.scripted_remoting import ScriptedRemoting

MQ = MessageQueue("T", "broker-b", 3)


@pytest.mark.parametrize(
    "request_of",
    [
        lambda: req.pull_request(MQ, "g", 7, 32, expression=FilterExpression("A || B")),
        lambda: req.pull_request(MQ, "g", 7, 1, suspend_ms=30_000),
        lambda: req.offset_request(codes.GET_MIN_OFFSET, MQ),
        lambda: req.offset_request(codes.GET_MAX_OFFSET, MQ, committed="true"),
        lambda: req.offset_request(codes.SEARCH_OFFSET_BY_TIMESTAMP, MQ, timestamp="1", boundaryType="LOWER"),
        lambda: req.query_consumer_offset_request("g", MQ),
        lambda: req.update_consumer_offset_request("g", MQ, 9),
    ],
    ids=["pull", "held pull", "min offset", "max offset", "search by time", "query offset", "update offset"],
)
def test_every_request_on_a_queue_names_its_broker_group(request_of):
    assert request_of().ext_fields["bname"] == "broker-b"


def test_a_send_names_its_broker_group_in_its_header():
    cmd = req.send_request("pg", MQ, [OutgoingMessage(body=b"x")])
    assert cmd.ext_fields["n"] == "broker-b"


def test_a_proxy_without_the_topic_list_refuses_topic_patterns_naming_the_fix():
    """The proxy's remoting port answers routes but not the name server's topic list or cluster info (code 3)."""
    with ScriptedRemoting(None) as peer, RemotingClient(peer.address, request_timeout=5) as client:
        assert client.route("T").broker("broker-a").master_address == peer.address
        with pytest.raises(UnsupportedError, match=r"proxy.*topicPattern.*name the topics"):
            client.topics()
        with pytest.raises(UnsupportedError, match=r"proxy"):
            client.live_brokers()


def test_a_proxys_answer_for_a_group_without_consumers_is_none():
    """The proxy asks only its own clients and answers a group it has none of with a NullPointerException."""
    answer = RemotingCommand(
        code=codes.SYSTEM_ERROR,
        flag=1,
        remark='Cannot invoke "org.apache.rocketmq.broker.'
        'client.ConsumerGroupInfo.getAllClientId()" because "consumerGroupInfo" is null',
    )
    assert req.consumer_list(answer, "g", "127.0.0.1:1") == []


@pytest.mark.parametrize(
    "answer, refused",
    [
        (RemotingCommand(code=codes.SUCCESS), r"answered SUCCESS.*RocketMQ 5 proxy.*at_least_once.*name servers"),
        (
            RemotingCommand(code=codes.REQUEST_CODE_NOT_SUPPORTED, remark="request type 37 not supported"),
            r"does not serve END_TRANSACTION.*at_least_once",
        ),
        (RemotingCommand(code=codes.SYSTEM_ERROR, remark="Find prepared transaction message failed"), None),
    ],
    ids=["the proxy", "no transactions", "a broker"],
)
def test_exactly_once_is_refused_where_end_transaction_ends_nothing(answer, refused):
    """A broker looks up the half an END_TRANSACTION names and answers an error for one that does not exist; the
    proxy's remoting port answers SUCCESS to every END_TRANSACTION and forwards none of halves sent over remoting."""
    with (
        ScriptedRemoting(None, fixed={codes.END_TRANSACTION: answer}) as peer,
        RemotingClient(peer.address, request_timeout=5) as client,
    ):
        if refused is None:
            refuse_unended_transactions(client, "T", "pg")
        else:
            with pytest.raises(OptionError, match=refused):
                refuse_unended_transactions(client, "T", "pg")


def test_a_send_the_proxy_refuses_for_the_topics_message_type_says_so():
    """The proxy checks each send against the topic's message.type (which brokers do not) and answers
    MESSAGE_ILLEGAL, the code of a message too large."""
    answer = RemotingCommand(
        code=codes.MESSAGE_ILLEGAL,
        flag=1,
        remark="TopicMessageType validate failed, the expected type is NORMAL, but actual type is FIFO",
    )
    error = error_for(answer, "send to T:broker-a/0", "127.0.0.1:1")
    assert isinstance(error, MessageRejectedError)
    assert "message.type" in str(error) and "MIXED" in str(error) and "too large" not in str(error)


def test_a_task_refuses_transactional_rows_for_a_topic_whose_servers_end_no_transaction():
    """A topic the option does not name (rows carry it) is asked before its first half message, in the task."""
    proxy = RemotingCommand(code=codes.SUCCESS)
    with (
        ScriptedRemoting(None, fixed={codes.END_TRANSACTION: proxy, codes.GET_TOPIC_CONFIG: proxy}) as peer,
        RemotingClient(peer.address, request_timeout=5) as client,
    ):
        TopicTypes(client, transactional=False, group="pg").check("T", OutgoingMessage(b"x"))
        with pytest.raises(OptionError, match=r"exactly_once cannot write to topic 'T'.*RocketMQ 5 proxy"):
            TopicTypes(client, transactional=True, group="pg").check("T", OutgoingMessage(b"x"))


def test_a_topics_attributes_are_asked_once_for_its_planning_checks():
    """Planning asks whether a new topic is a LiteTopic and whether it is a compaction topic: one GET_TOPIC_CONFIG
    answers both (here as a 4.x broker or the proxy answers it: not supported, so no attributes)."""
    unsupported = RemotingCommand(code=codes.REQUEST_CODE_NOT_SUPPORTED, remark="request type 351 not supported")
    with ScriptedRemoting(None, fixed={codes.GET_TOPIC_CONFIG: unsupported}) as peer:
        with RemotingClient(peer.address, request_timeout=5) as client:
            assert client.topic_message_type("T") is None and not client.is_compacted("T")
            assert peer.asked[codes.GET_TOPIC_CONFIG] == 1
