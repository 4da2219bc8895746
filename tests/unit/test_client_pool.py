"""Shared executor clients: one per settings, leased per task, closed when idle, bounded, keyed without secrets."""

from __future__ import annotations

import pytest

from rmq_spark import client_pool
from rmq_spark.options import parse_options


class FakeClient:
    """Stands in for a client's connections: the point here is the table's bookkeeping, not the network."""

    def __init__(self, options):
        self.options, self.closed = options, False

    def close(self):
        self.closed = True


@pytest.fixture
def table(monkeypatch):
    monkeypatch.setattr(client_pool, "new_client", FakeClient)
    monkeypatch.setattr(client_pool, "_shared", {})
    return client_pool._shared


def opts(i: int, secret: str = "s3cr3t-value"):
    return parse_options({"nameServer": f"h{i}:9876", "topic": "T", "accessKey": "AK", "secretKey": secret})


def test_one_client_per_settings_and_no_secret_in_its_key(table):
    with client_pool.shared_client(opts(1)) as a, client_pool.shared_client(opts(1)) as b:
        assert a is b
    with client_pool.shared_client(opts(1, secret="other")) as c:
        assert c is not a
    assert all("s3cr3t-value" not in key and "other" not in key for key in table)


def test_idle_clients_are_closed_and_in_use_ones_kept(table, monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(client_pool.time, "monotonic", lambda: now[0])
    with client_pool.shared_client(opts(1)) as idle:
        pass
    with client_pool.shared_client(opts(2)) as busy:
        now[0] += client_pool.IDLE_S + 1
        with client_pool.shared_client(opts(3)):
            pass
        assert idle.closed and not busy.closed  # the lease keeps it
    assert len(table) == 2


def test_at_most_max_shared_unused_clients(table):
    clients = []
    for i in range(client_pool.MAX_SHARED + 5):
        with client_pool.shared_client(opts(i)) as c:
            clients.append(c)
    assert len(table) == client_pool.MAX_SHARED
    assert [c.closed for c in clients] == [True] * 5 + [False] * client_pool.MAX_SHARED  # least recently used first
