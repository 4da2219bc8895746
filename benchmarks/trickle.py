"""A steady trickle for the scale profile, in a process of its own (so that it loads neither the driver under
measurement nor the harness): one message to every queue of the given topics every ``--every`` seconds, the sends
spread evenly over that period (every 10 ms the ones due), each queue's in turn. It runs until stdin closes or
``--seconds`` pass, then prints ``{"sent": N, "failed": N}``.

    python -m benchmarks.trickle --name-server 127.0.0.1:9876 --every 5 TOPIC [TOPIC ...]
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import threading
import time

from rmq_spark.client.errors import RETRYABLE, RocketMQError
from rmq_spark.client.model import MessageQueue, OutgoingMessage
from rmq_spark.client.remoting.client import RemotingClient

TICK_S = 0.01
SEND_TRIES = 3  # the Java producer's one send and retryTimesWhenSendFailed (2)


def spread(queues: list[MessageQueue]) -> list[MessageQueue]:
    """``queues`` in the order they get their messages: queue ids, brokers and topics interleaved, so that the
    sends of any moment fall on every broker and many topics."""
    return sorted(queues, key=lambda mq: (mq.queue_id, mq.broker_name, mq.topic))


def run(name_server: str, topics: list[str], every: float, seconds: float, stop: threading.Event) -> dict:
    """Send one message per queue of ``topics`` every ``every`` seconds until ``stop`` is set or ``seconds``
    pass; the counts of sends answered and failed."""
    with RemotingClient(name_server) as client:
        queues = spread([mq for topic in topics for mq in client.route(topic).write_queues()])
        ended: collections.deque = collections.deque()  # appended by the connections' threads
        issued, sent, failed = 0, 0, 0

        def send(mq: MessageQueue, message: OutgoingMessage, tries: int) -> None:
            call = client.send_async(mq, [message])
            call.add_done_callback(lambda: ended.append((call, mq, message, tries)))

        def count() -> None:
            nonlocal sent, failed
            while ended:
                call, mq, message, tries = ended.popleft()
                try:
                    call.result()
                    sent += 1
                except RETRYABLE:
                    if tries < SEND_TRIES:  # as the Java producer's retryTimesWhenSendFailed: a busy or slow broker
                        send(mq, message, tries + 1)
                    else:
                        failed += 1
                except RocketMQError:
                    failed += 1

        start = time.monotonic()
        while not stop.is_set() and time.monotonic() - start < seconds:
            due = int((time.monotonic() - start) / every * len(queues)) + 1
            for i in range(issued, due):
                send(queues[i % len(queues)], OutgoingMessage(body=b"t%d" % i).with_unique_id(), 1)
            issued = max(issued, due)
            count()
            stop.wait(TICK_S)
        deadline = time.monotonic() + 10
        while sent + failed < issued and time.monotonic() < deadline:
            count()
            time.sleep(TICK_S)
    return {"sent": sent, "failed": failed}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--name-server", required=True)
    ap.add_argument("--every", type=float, default=5.0, help="seconds between two messages to the same queue")
    ap.add_argument("--seconds", type=float, default=3600.0, help="stop after this long at the latest")
    ap.add_argument("topics", nargs="+")
    args = ap.parse_args(argv)
    if args.every <= 0:
        ap.error(f"--every must be a positive number of seconds, not {args.every}")
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    print(json.dumps(run(args.name_server, args.topics, args.every, args.seconds, stop)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
