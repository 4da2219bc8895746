"""The stream driver's route poll asks the routes of all its topics at once (125 topics read one
after another cost a send and a wake-up each): one write to the name server that answered last, a topic it does not
answer asked of the others, a topic it does not know told as such, and a name server that is down keeps the routes
last read."""

from __future__ import annotations

import json

from rmq_spark.client import RemotingClient
from rmq_spark.client.errors import TopicNotFoundError
from rmq_spark.client.remoting import codes
from rmq_spark.client.remoting.frame import RemotingCommand, encode_command
from tests.support.loopback_peer import Peer, read_request

TOPICS = ["A", "B", "C"]


def _route_body(topic: str) -> bytes:
    return json.dumps(
        {
            "brokerDatas": [{"cluster": "c", "brokerName": f"broker-{topic}", "brokerAddrs": {"0": "127.0.0.1:1"}}],
            "queueDatas": [{"brokerName": f"broker-{topic}", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6}],
        }
    ).encode()


class _NameServer:
    """Answers route requests only once ``batch`` of them came (a client asking one after another gets nothing),
    the topics in ``unknown`` with TOPIC_NOT_EXIST; with ``silent`` it reads and answers nothing."""

    def __init__(self, batch: int, unknown: tuple[str, ...] = (), silent: bool = False) -> None:
        self.batch, self.unknown, self.silent = batch, unknown, silent
        self.asked: list[str] = []
        self._peer = Peer(self._serve)
        self.address = self._peer.address

    def _serve(self, sock) -> None:
        while True:
            requests = [read_request(sock) for _ in range(self.batch)]
            if self.silent:
                continue
            for request in requests:
                topic = request.ext_fields["topic"]
                self.asked.append(topic)
                if topic in self.unknown:
                    response = RemotingCommand(code=codes.TOPIC_NOT_EXIST, remark=f"no topic {topic}")
                else:
                    response = RemotingCommand(code=codes.SUCCESS, body=_route_body(topic))
                response.opaque, response.flag = request.opaque, 1
                sock.sendall(encode_command(response))

    def close(self) -> None:
        self._peer.close()


def test_the_routes_of_all_topics_are_asked_in_one_go():
    server = _NameServer(batch=3, unknown=("B",))
    try:
        with RemotingClient(server.address, request_timeout=2.0) as client:
            routes = client.refresh_routes(TOPICS)
            assert routes["A"].brokers[0].broker_name == "broker-A"
            assert routes["C"].brokers[0].broker_name == "broker-C"
            assert isinstance(routes["B"], TopicNotFoundError) and "'B' does not exist" in str(routes["B"])
            assert client.cached_route("C") is routes["C"]
    finally:
        server.close()


def test_a_name_server_that_does_not_answer_is_passed_over_for_the_others():
    silent, answering = _NameServer(batch=1, silent=True), _NameServer(batch=1)
    try:
        with RemotingClient([silent.address, answering.address], request_timeout=1.0) as client:
            routes = client.refresh_routes(TOPICS)
            assert [routes[t].brokers[0].broker_name for t in TOPICS] == ["broker-A", "broker-B", "broker-C"]
            assert sorted(answering.asked) == TOPICS
            assert client.refresh_routes(["A"])["A"].brokers[0].broker_name == "broker-A"  # asked of it first now
            assert answering.asked[-1] == "A"
    finally:
        silent.close()
        answering.close()


def test_name_servers_that_all_fail_keep_the_routes_last_read():
    server = _NameServer(batch=1)
    with RemotingClient(server.address, request_timeout=1.0) as client:
        first = client.refresh_routes(TOPICS)
        server.close()
        server.silent = True
        again = client.refresh_routes(TOPICS)
        assert all(again[t] is first[t] for t in TOPICS)
