"""A finished call, as the clients' ``*_async`` methods return them: for fakes that answer at once."""

from __future__ import annotations

from rmq_spark.client.errors import RocketMQError


class Done:
    """A call that has finished with ``result``, or with ``error`` raised by ``result()``."""

    def __init__(self, result=None, error: BaseException | None = None) -> None:
        self._result, self._error = result, error

    def result(self):
        if self._error is not None:
            raise self._error
        return self._result

    def cancel(self) -> None:
        pass


def refresh_each(client, topics) -> dict:
    """``refresh_routes`` for a fake that has ``route(topic, refresh)``: each topic's route or the error it raised."""
    out = {}
    for topic in topics:
        try:
            out[topic] = client.route(topic, refresh=True)
        except RocketMQError as e:
            out[topic] = e
    return out
