"""A scripted peer that speaks the remoting protocol on 127.0.0.1, for unit tests of the native pull loop: it is
name server and broker at once (GET_ROUTEINFO_BY_TOPIC names itself as the one broker), and answers GET_MIN_OFFSET
and PULL_MESSAGE from a Python fake of the client's calls (``pull_async``, ``min_offset``), so that a
``RemotingClient`` reads the same scripted queue that the Python driver reads through ``SharedPulls``: short
answers, filters, deleted heads, outages, error codes. Other requests get a fixed answer by code, if given
one. RocketMQ itself is the integration tests' job.

The fake's answers map to the broker's: a PullResult to its response code, remark and header fields; a
ConnectionLostError to a closed connection; another RocketMQError to its code and remark."""

from __future__ import annotations

import json
import socket
from collections import Counter

from rmq_spark.client.errors import ConnectionLostError, RocketMQError
from rmq_spark.client.model import FilterExpression, MessageQueue
from rmq_spark.client.remoting import codes
from rmq_spark.client.remoting.frame import RemotingCommand, encode_command
from rmq_spark.compiled import PullStatus
from tests.support.loopback_peer import Peer, read_request

_CODES = {
    PullStatus.FOUND: (codes.SUCCESS, None),
    PullStatus.NO_NEW_MSG: (codes.PULL_NOT_FOUND, None),
    PullStatus.NO_MATCHED_MSG: (codes.PULL_RETRY_IMMEDIATELY, codes.NO_MATCHED_MESSAGE),
    PullStatus.RETRY_IMMEDIATELY: (codes.PULL_RETRY_IMMEDIATELY, "OFFSET_IN_ERROR"),
    PullStatus.OFFSET_ILLEGAL: (codes.PULL_OFFSET_MOVED, None),
}


class ScriptedRemoting:
    """Serves ``fake`` (an object with ``pull_async(mq, offset, max_nums, **subscription)`` answering pendings of
    PullResult, and ``min_offset(mq)``) for queues ``broker_name``/0..``queues``-1 of any topic."""

    def __init__(
        self, fake, *, broker_name: str = "broker-a", queues: int = 1, fixed: dict[int, RemotingCommand] | None = None
    ) -> None:
        self.fake, self.broker_name, self.queues = fake, broker_name, queues
        self.fixed = dict(fixed or {})  # a fixed answer per request code
        self.asked: Counter[int] = Counter()  # requests by code
        self._peer = Peer(self._serve)
        self.address = self._peer.address

    def close(self) -> None:
        self._peer.close()

    def __enter__(self) -> ScriptedRemoting:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _serve(self, sock: socket.socket) -> None:
        while True:
            request = read_request(sock)  # OSError once the client closed it: the peer ends the connection
            response = self._answer(request)
            if response is None:
                return  # the fake's outage: the connection breaks
            response.opaque, response.flag = request.opaque, 1
            sock.sendall(encode_command(response))

    def _answer(self, request: RemotingCommand) -> RemotingCommand | None:
        ext = request.ext_fields
        self.asked[request.code] += 1
        if request.code == codes.GET_ROUTEINFO_BY_TOPIC:
            route = {
                "brokerDatas": [{"cluster": "c", "brokerName": self.broker_name, "brokerAddrs": {"0": self.address}}],
                "queueDatas": [
                    {
                        "brokerName": self.broker_name,
                        "readQueueNums": self.queues,
                        "writeQueueNums": self.queues,
                        "perm": 6,
                    }
                ],
            }
            return RemotingCommand(code=codes.SUCCESS, body=json.dumps(route).encode())
        if request.code in self.fixed:
            fixed = self.fixed[request.code]
            return RemotingCommand(code=fixed.code, remark=fixed.remark, ext_fields=dict(fixed.ext_fields))
        mq = MessageQueue(ext.get("topic", ""), self.broker_name, int(ext.get("queueId", 0)))
        try:
            if request.code == codes.GET_MIN_OFFSET:
                return RemotingCommand(code=codes.SUCCESS, ext_fields={"offset": str(self.fake.min_offset(mq))})
            if request.code != codes.PULL_MESSAGE:
                return RemotingCommand(code=codes.REQUEST_CODE_NOT_SUPPORTED, remark=f"code {request.code}")
            r = self.fake.pull_async(
                mq,
                int(ext["queueOffset"]),
                int(ext["maxMsgNums"]),
                group=ext["consumerGroup"],
                expression=FilterExpression(ext["subscription"], ext["expressionType"]),
            ).result()
        except ConnectionLostError:
            return None
        except RocketMQError as e:
            return RemotingCommand(code=e.code if e.code is not None else codes.SYSTEM_ERROR, remark=e.remark)
        code, remark = _CODES[r.status]
        return RemotingCommand(
            code=code,
            remark=remark,
            body=r.body,
            ext_fields={
                "nextBeginOffset": str(r.next_begin_offset),
                "minOffset": str(r.min_offset),
                "maxOffset": str(r.max_offset),
                "suggestWhichBrokerId": str(r.suggest_which_broker_id),
            },
        )
