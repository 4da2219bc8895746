"""A static topic's logic queues without a broker: the route's leaders (newest epoch), the ranges planned around a
remapping's gap of logic offsets, and the rows of a logic queue gathered from blocks stored under a broker's queue
(offsetDelta)."""

from __future__ import annotations

from rmq_spark.client.model import LOGIC_BROKER, MessageQueue
from rmq_spark.client.remoting.namesrv import parse_route
from rmq_spark.source.arrow_decoder import ArrowBatchDecoder
from rmq_spark.source.offsets import QueueRange
from rmq_spark.source.planning import plan_ranges
from tests.support.stored_messages import encode_stored_message

# as a 5.x name server answers after logic queue 0 moved from broker-a (epoch 1) to broker-b (epoch 2), while
# broker-a has not registered its new mapping yet (fastjson's integer keys)
ROUTE = (
    b'{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:1001"},"brokerName":"broker-a","cluster":"C"},'
    b'{"brokerAddrs":{0:"127.0.0.1:1002"},"brokerName":"broker-b","cluster":"C"}],'
    b'"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":2,"topicSysFlag":0,"writeQueueNums":2},'
    b'{"brokerName":"broker-b","perm":6,"readQueueNums":2,"topicSysFlag":0,"writeQueueNums":2}],'
    b'"topicQueueMappingByBroker":{"broker-a":{"bname":"broker-a","currIdMap":{0:0,1:1},"epoch":1,'
    b'"scope":"__global__","topic":"S","totalQueues":3},"broker-b":{"bname":"broker-b","currIdMap":{0:1,2:0},'
    b'"epoch":2,"scope":"__global__","topic":"S","totalQueues":3}}}'
)


def logic(queue_id: int) -> MessageQueue:
    return MessageQueue("S", LOGIC_BROKER, queue_id)


def test_each_logic_queue_is_served_by_the_broker_group_of_its_newest_mapping():
    route = parse_route("S", ROUTE)
    assert route.read_queues() == route.write_queues() == [logic(0), logic(1), logic(2)]
    assert [route.serving_broker(mq) for mq in route.read_queues()] == ["broker-b", "broker-a", "broker-b"]
    assert route.broker_of(logic(0)).master_address == "127.0.0.1:1002"
    assert route.broker_of(logic(7)) is None  # led by no broker group in the route: unavailable
    assert route.queue_data(LOGIC_BROKER).read_queue_nums == 3
    assert route.broker_of(MessageQueue("S", "broker-a", 1)).broker_name == "broker-a"  # a broker's own queue


def test_a_remapping_gap_is_neither_read_nor_lost():
    mq = logic(0)
    ranges = plan_ranges({mq: 3}, {mq: 10004}, {mq: 0}, fail_on_data_loss=True, gaps={mq: [(5, 10000)]})
    assert ranges == [QueueRange(mq, 3, 5), QueueRange(mq, 10000, 10004)]
    assert plan_ranges({mq: 5}, {mq: 10000}, {mq: 0}, fail_on_data_loss=True, gaps={mq: [(5, 10000)]}) == []


def test_rows_of_a_logic_queue_carry_its_id_and_logic_offsets():
    # queue 1 of broker-b holds logic queue 0 from logic offset 10000 on (offsetDelta 10000); an older block of
    # broker-a's queue 0 has delta 0
    old = encode_stored_message(topic="S", queue_id=0, queue_offset=4, body=b"old")
    new = b"".join(encode_stored_message(topic="S", queue_id=1, queue_offset=o, body=b"new%d" % o) for o in (0, 1))
    decoder = ArrowBatchDecoder(LOGIC_BROKER, queue=logic(0))
    decoder.add(old, 4, 5)
    decoder.add(new, 10000, 10001, 10000)  # the second record is past the window
    batch = decoder.flush().to_pydict()
    assert (batch["brokerName"], batch["queueId"], batch["queueOffset"], batch["body"]) == (
        [LOGIC_BROKER] * 2,
        [0, 0],
        [4, 10000],
        [b"old", b"new0"],
    )
