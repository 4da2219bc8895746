"""Name server requests: the route of a topic and the list of all topics, with failover over several addresses."""

from __future__ import annotations

from collections.abc import Sequence

from rmq_spark.client.errors import (
    ConnectionLostError,
    RequestTimeoutError,
    RocketMQError,
    TopicNotFoundError,
    UnsupportedError,
)
from rmq_spark.client.model import LOGIC_BROKER_PREFIX, BrokerData, QueueData, TopicRoute
from rmq_spark.client.remoting import codes
from rmq_spark.client.remoting.connection import ConnectionPool, PendingRequest, burst
from rmq_spark.client.remoting.frame import RemotingCommand, parse_loose_json
from rmq_spark.client.remoting.status import check


class NameServerClient:
    """Asks the first reachable name server; remembers which one answered last."""

    def __init__(self, pool: ConnectionPool, addresses: list[str], timeout: float = 5.0) -> None:
        if not addresses:
            raise RocketMQError("no name server address given: set nameServer to host:port[;host:port]")
        self._pool = pool
        self._addresses = list(addresses)
        self._timeout = timeout
        self._preferred = 0

    @property
    def addresses(self) -> list[str]:
        return list(self._addresses)

    def _request(
        self, cmd_factory, what: str, *, failed: tuple[str, RocketMQError] | None = None
    ) -> tuple[RemotingCommand, str]:
        """The first answer of the name servers asked in turn, from the one that answered last; ``failed``: a name
        server that just failed to answer, and why (it is not asked again)."""
        errors = [f"{failed[0]}: {failed[1]}"] if failed is not None else []
        n = len(self._addresses)
        for i in range(n):
            idx = (self._preferred + i) % n
            address = self._addresses[idx]
            if failed is not None and address == failed[0]:
                continue
            try:
                response = self._pool.request(address, cmd_factory(), self._timeout)
            except (ConnectionLostError, RequestTimeoutError) as e:
                errors.append(f"{address}: {e}")
                continue
            self._preferred = idx
            return response, address
        raise ConnectionLostError(
            f"{what}: no name server answered ({'; '.join(errors)}); check the nameServer "
            "option and that the name servers are running and reachable"
        )

    def route(self, topic: str, *, failed: tuple[str, RocketMQError] | None = None) -> TopicRoute:
        """The topic's brokers and queues; TopicNotFoundError when no name server has a route for it (``failed``:
        as ``_request``)."""
        response, address = self._request(lambda: _route_request(topic), f"route of topic {topic!r}", failed=failed)
        try:
            return _route_of(topic, response, address)
        except TopicNotFoundError as e:
            found = self._routes_elsewhere({topic: e}, address, failed)[topic]
        if isinstance(found, RocketMQError):
            raise found
        return found

    def routes(self, topics: Sequence[str]) -> list[TopicRoute | RocketMQError]:
        """The route of each of ``topics``, or the error asking it raised: asked of the name server that answered
        last, all in one write; a topic it does not answer is asked of the others in turn (``route``)."""
        address = self._addresses[self._preferred]
        calls: list[PendingRequest | RocketMQError] = []
        with burst():
            for topic in topics:
                try:
                    calls.append(self._pool.send(address, _route_request(topic), self._timeout))
                except ConnectionLostError as e:
                    calls.append(e)
        out: list[TopicRoute | RocketMQError] = []
        missing: dict[str, TopicNotFoundError] = {}
        for topic, call in zip(topics, calls, strict=True):
            try:
                if isinstance(call, RocketMQError):
                    raise call
                out.append(_route_of(topic, call.result(), address))
            except (ConnectionLostError, RequestTimeoutError) as e:
                try:
                    out.append(self.route(topic, failed=(address, e)))
                except RocketMQError as e:
                    out.append(e)
            except TopicNotFoundError as e:
                missing[topic] = e
                out.append(e)
            except RocketMQError as e:
                out.append(e)
        if missing:
            found = self._routes_elsewhere(missing, address)
            out = [
                found.get(topic, r) if isinstance(r, TopicNotFoundError) else r
                for topic, r in zip(topics, out, strict=True)
            ]
        return out

    def _routes_elsewhere(
        self,
        missing: dict[str, TopicNotFoundError],
        said_no: str,
        failed: tuple[str, RocketMQError] | None = None,
    ) -> dict[str, TopicRoute | RocketMQError]:
        """The routes of the topics that name server ``said_no`` has none of (``missing``: what it answered), from
        the other name servers. A restarted name server has no routes until the brokers register with it again
        (every 30 s) while the others have them, so a topic is not found only when no name server has it. Every topic
        is asked of every other name server at once, so that this costs one request timeout more, not one per name
        server. The first to give a route is asked first from then on."""
        skip = {said_no, *((failed[0],) if failed is not None else ())}
        others = [a for a in self._addresses if a not in skip]
        if not others:
            return dict(missing)
        calls: dict[str, list[tuple[str, PendingRequest | RocketMQError]]] = {topic: [] for topic in missing}
        with burst():
            for address in others:
                sent: list[PendingRequest | RocketMQError] = []
                try:
                    for topic in missing:
                        sent.append(self._pool.send(address, _route_request(topic), self._timeout))
                except RocketMQError as e:  # no connection: its other topics are not asked
                    sent += [e] * (len(missing) - len(sent))
                for topic, call in zip(missing, sent, strict=True):
                    calls[topic].append((address, call))
        out: dict[str, TopicRoute | RocketMQError] = {}
        for topic, first in missing.items():
            no, silent = [said_no], [f"{failed[0]}: {failed[1]}"] if failed is not None else []
            for address, call in calls[topic]:
                if topic in out:
                    if not isinstance(call, RocketMQError):
                        call.cancel()
                    continue
                try:
                    if isinstance(call, RocketMQError):
                        raise call
                    out[topic] = _route_of(topic, call.result(), address)
                    self._preferred = self._addresses.index(address)
                except TopicNotFoundError:
                    no.append(address)
                except RocketMQError as e:
                    silent.append(f"{address}: {e}")
            if topic not in out:
                unasked = f" (and no answer from {'; '.join(silent)})" if silent else ""
                out[topic] = TopicNotFoundError(
                    f"topic {topic!r} does not exist on name servers {', '.join(no)}{unasked}: check the topic name, "
                    "or create the topic",
                    code=first.code,
                    remark=first.remark,
                )
        return out

    def put_value(self, namespace: str, key: str, value: str) -> list[str]:
        """``key`` = ``value`` in ``namespace`` of every name server's KV config, which each writes to its disk at
        once (KVConfigManager): the addresses that stored it. An unreachable name server is left out; a refusal
        raises."""
        return [a for a, answer in self._ask_all(codes.PUT_KV_CONFIG, namespace, key, value).items() if answer]

    def values(self, namespace: str, key: str) -> dict[str, str | None]:
        """Each answering name server's value of ``key`` in ``namespace`` (None: it has none)."""
        return {a: answer or None for a, answer in self._ask_all(codes.GET_KV_CONFIG, namespace, key).items()}

    def _ask_all(self, code: int, namespace: str, key: str, value: str | None = None) -> dict[str, str]:
        """A KV config request to every name server at once: per address that answered, the value (a put's: its
        own ``value``; a get that found none: empty)."""
        fields = {"namespace": namespace, "key": key, **({"value": value} if value is not None else {})}
        calls: dict[str, PendingRequest] = {}
        with burst():
            for address in self._addresses:
                try:
                    calls[address] = self._pool.send(
                        address, RemotingCommand(code=code, ext_fields=fields), self._timeout
                    )
                except (ConnectionLostError, RequestTimeoutError):
                    continue
        out: dict[str, str] = {}
        for address, call in calls.items():
            try:
                response = call.result()
            except (ConnectionLostError, RequestTimeoutError):
                continue
            check(response, f"KV config {namespace}/{key}", address, codes.QUERY_NOT_FOUND)
            if code == codes.PUT_KV_CONFIG:
                out[address] = value or ""
            elif response.code == codes.SUCCESS:
                out[address] = response.ext_fields.get("value", "")
            else:
                out[address] = ""
        return out

    def _cluster_info(self) -> tuple[dict, dict]:
        """GET_BROKER_CLUSTER_INFO: (brokerAddrTable, clusterAddrTable)."""
        response, address = self._request(lambda: RemotingCommand(code=codes.GET_BROKER_CLUSTER_INFO), "cluster info")
        _check_routes_only(response, "cluster info", address, "which brokers are registered cannot be told")
        try:
            data = parse_loose_json(response.body.decode("utf-8")) if response.body else {}
            brokers, clusters = data.get("brokerAddrTable") or {}, data.get("clusterAddrTable") or {}
            if not isinstance(brokers, dict) or not isinstance(clusters, dict):
                raise TypeError("brokerAddrTable and clusterAddrTable must be objects")
            return brokers, clusters
        except (UnicodeDecodeError, TypeError, ValueError, AttributeError) as e:
            raise RocketMQError(f"the cluster info of name server {address} could not be read: {e!r}") from e

    def live_brokers(self) -> set[str]:
        """The broker groups registered now: names with at least one address."""
        brokers, _ = self._cluster_info()
        return {name for name, b in brokers.items() if isinstance(b, dict) and b.get("brokerAddrs")}

    def clusters(self) -> dict[str, set[str]]:
        """The clusters registered now and the names of their broker groups."""
        _, clusters = self._cluster_info()
        return {name: set(brokers or ()) for name, brokers in clusters.items()}

    def topics(self) -> list[str]:
        """Every topic the name server knows, sorted."""
        response, address = self._request(
            lambda: RemotingCommand(code=codes.GET_ALL_TOPIC_LIST_FROM_NAMESERVER), "topic list"
        )
        _check_routes_only(
            response,
            "topic list",
            address,
            "option topicPattern needs the topic list: name the topics (option topic or topics), or "
            "point nameServer at the cluster's name servers",
        )
        data = parse_loose_json(response.body.decode("utf-8", "replace")) if response.body else {}
        return sorted(data.get("topicList") or [])


def _check_routes_only(response: RemotingCommand, what: str, address: str, consequence: str) -> None:
    """``check``, with UnsupportedError where the server does not serve the request: a RocketMQ 5 proxy's remoting
    port answers routes as a name server does, and nothing else a name server serves."""
    if response.code == codes.REQUEST_CODE_NOT_SUPPORTED:
        raise UnsupportedError(
            f"{what}: the server at {address} answers routes but not this request (a RocketMQ 5 "
            f"proxy's remoting port serves routes only): {consequence}",
            code=response.code,
            remark=response.remark,
        )
    check(response, what, address)


def _route_request(topic: str) -> RemotingCommand:
    return RemotingCommand(code=codes.GET_ROUTEINFO_BY_TOPIC, ext_fields={"topic": topic})


def _route_of(topic: str, response: RemotingCommand, address: str) -> TopicRoute:
    """The route a GET_ROUTEINFO_BY_TOPIC answer of name server ``address`` gives; TopicNotFoundError when it has
    none."""
    if response.code == codes.TOPIC_NOT_EXIST:
        raise TopicNotFoundError(
            f"topic {topic!r} does not exist on name server {address}: check the topic name, or create the topic",
            code=response.code,
            remark=response.remark,
        )
    check(response, f"route of topic {topic!r}", address)
    return parse_route(topic, response.body)


def parse_route(topic: str, body: bytes) -> TopicRoute:
    """Decode the name server's TopicRouteData JSON (standard or with fastjson's integer keys). A group whose
    brokers take part in slave-acting-master mode (``enableActingMaster``) and whose queue data lost its write
    permission has no master: the name server took the write permission off when the master left, and (with
    supportActingMaster) lists the group's first slave at brokerId 0 in its place (RouteInfoManager.
    pickupTopicRouteData). A read-only topic of such a group is taken the same way: the route cannot tell them
    apart."""
    try:
        data = parse_loose_json(body.decode("utf-8"))
        queues = tuple(
            QueueData(
                broker_name=q["brokerName"],
                read_queue_nums=int(q["readQueueNums"]),
                write_queue_nums=int(q["writeQueueNums"]),
                perm=int(q["perm"]),
                topic_sys_flag=int(q.get("topicSysFlag") or 0),
            )
            for q in data.get("queueDatas") or []
        )
        read_only = {q.broker_name for q in queues if not q.writable}
        brokers = tuple(
            BrokerData(
                broker_name=b["brokerName"],
                cluster=b.get("cluster") or "",
                addresses={int(k): v for k, v in (b.get("brokerAddrs") or {}).items()},
                acting_master=bool(b.get("enableActingMaster")) and b["brokerName"] in read_only,
            )
            for b in data.get("brokerDatas") or []
        )
        leaders = logic_leaders(data.get("topicQueueMappingByBroker") or {})
    except (UnicodeDecodeError, KeyError, TypeError, ValueError, AttributeError) as e:
        raise RocketMQError(f"the name server's route for topic {topic!r} could not be read: {e!r}") from e
    return TopicRoute(topic=topic, brokers=brokers, queues=queues, logic_leaders=leaders)


def logic_leaders(mapping: dict) -> dict[tuple[str, int], str]:
    """A static topic's logic queues and the broker group leading each, from the route's topicQueueMappingByBroker
    (each broker group's TopicQueueMappingInfo: its scope, its epoch and the logic queues it leads, currIdMap): a
    logic queue listed by several groups is led by the one of the newest epoch, as RocketMQ's ClientMetadata.
    topicRouteData2EndpointsForStaticTopic picks it."""
    newest: dict[tuple[str, int], tuple[int, str]] = {}
    for broker_name, info in mapping.items():
        scope = str(info.get("scope") or "__global__")
        logic = LOGIC_BROKER_PREFIX + (scope[2:] if scope.startswith("__") else scope)
        epoch = int(info.get("epoch") or 0)
        for logic_id in info.get("currIdMap") or {}:
            key = (logic, int(logic_id))
            if key not in newest or newest[key][0] <= epoch:
                newest[key] = (epoch, str(info.get("bname") or broker_name))
    return {key: leader for key, (_, leader) in newest.items()}
