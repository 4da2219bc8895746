"""Slave-acting-master routes (name server supportActingMaster, brokers enableSlaveActingMaster): while a group's
master is away, the name server lists its first slave at brokerId 0 and takes the write permission off the topic's
queue data. The client must take that node for the slave it is: reads know they are a replica's, nothing that
needs a master (holds, offset mirror, sends, commit records) goes to it. The route below was recorded from the
embedded RocketMQ 5.5.0 in that mode, one second after broker-a's master stopped (tests/integration/
test_acting_master.py runs the same against the real broker)."""

from __future__ import annotations

import json

import pytest

from rmq_spark.client import RemotingClient
from rmq_spark.client.errors import BrokerUnavailableError
from rmq_spark.client.model import MessageQueue
from rmq_spark.client.remoting import codes
from rmq_spark.client.remoting.frame import RemotingCommand, encode_command
from rmq_spark.client.remoting.namesrv import parse_route
from tests.support.loopback_peer import Peer, read_request

RECORDED = (
    b'{"brokerDatas":[{"brokerAddrs":{"0":"127.0.0.1:30575"},"brokerName":"broker-a","cluster":"DefaultCluster",'
    b'"enableActingMaster":true}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":4,'
    b'"readQueueNums":2,"topicSysFlag":0,"writeQueueNums":2}]}'
)
MQ = MessageQueue("T", "broker-a", 0)


def _with(body: bytes, **changes) -> bytes:
    data = json.loads(body)
    for key, value in changes.items():
        target, field = key.split("__")
        data[target][0][field] = value
    return json.dumps(data).encode()


def test_the_recorded_route_has_no_master_and_its_slave_is_still_read():
    broker = parse_route("T", RECORDED).broker("broker-a")
    assert broker.master_address is None
    assert broker.read_candidates() == ["127.0.0.1:30575"]
    route = parse_route("T", RECORDED)
    assert route.read_queues() == [MQ, MessageQueue("T", "broker-a", 1)] and route.write_queues() == []


@pytest.mark.parametrize(
    "body",
    [
        _with(RECORDED, queueDatas__perm=6),  # the master registered again: writable
        _with(RECORDED, brokerDatas__enableActingMaster=False),  # a read-only topic of a cluster without the mode
        _with(RECORDED, brokerDatas__enableActingMaster=None),  # a name server older than the mode
    ],
    ids=["writable", "mode-off", "old-name-server"],
)
def test_a_master_at_broker_id_0_is_a_master_unless_the_route_marks_it_acting(body):
    assert parse_route("T", body).broker("broker-a").master_address == "127.0.0.1:30575"


class _ActingCluster:
    """Name server and broker-a's acting master at once: routes as recorded (naming itself), every other request
    answered SUCCESS (as the slave does for offsets and consumer offsets) and counted by code."""

    def __init__(self) -> None:
        self.codes: list[int] = []
        self._peer = Peer(self._serve)
        self.address = self._peer.address

    def _serve(self, sock) -> None:
        while True:
            request = read_request(sock)
            if request.code == codes.GET_ROUTEINFO_BY_TOPIC:
                response = RemotingCommand(
                    code=codes.SUCCESS, body=RECORDED.replace(b"127.0.0.1:30575", self.address.encode())
                )
            else:
                self.codes.append(request.code)
                response = RemotingCommand(code=codes.SUCCESS, ext_fields={"offset": "5"})
            response.opaque, response.flag = request.opaque, 1
            sock.sendall(encode_command(response))

    def close(self) -> None:
        self._peer.close()


@pytest.fixture
def cluster():
    c = _ActingCluster()
    yield c
    c.close()


def test_an_acting_master_answers_reads_as_a_replica_and_takes_no_hold_no_offset_and_no_send(cluster):
    with RemotingClient(cluster.address) as client:
        answers = client.max_offsets([MQ])
        assert answers == {MQ: 5} and answers.replica == {MQ}  # may lag behind the master that is away
        with pytest.raises(BrokerUnavailableError, match="no master"):
            client.hold_async(MQ, 5, group="g", hold_ms=1000)
        with pytest.raises(BrokerUnavailableError, match="no master"):
            client.holds("g", 1000).hold(MQ, 5)  # in the compiled core's hold lines
        stored = client.update_consumer_offsets("g", {MQ: 5}, partial=True)
        assert MQ in stored.failed and MQ not in stored
        with pytest.raises(BrokerUnavailableError, match="no master"):
            client.broker_address("T", "broker-a")
        assert not [b for b in client.route("T").brokers if b.master_address]  # the sink's marker looks for one
    assert cluster.codes == [codes.GET_MAX_OFFSET]
