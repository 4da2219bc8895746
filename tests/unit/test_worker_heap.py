"""worker_heap.freeze_once: the heap is frozen once, and only in a reused Spark Python worker."""

from __future__ import annotations

import gc

import pytest

import rmq_spark.worker_heap as worker_heap


@pytest.fixture
def fresh(monkeypatch):
    monkeypatch.setattr(worker_heap, "_frozen", False)
    yield
    gc.unfreeze()


def test_a_reused_worker_freezes_what_it_holds_once(fresh, monkeypatch):
    monkeypatch.setenv("SPARK_REUSE_WORKER", "1")
    worker_heap.freeze_once()
    frozen = gc.get_freeze_count()
    assert frozen > 0
    kept = [[] for _ in range(100)]  # objects made after the freeze stay collectable
    worker_heap.freeze_once()
    # a second freeze would add the 101 lists above; frozen objects freed meanwhile (by refcount, another thread's)
    # may lower the count by a few, which made an equality flaky on a loaded machine
    assert gc.get_freeze_count() < frozen + len(kept)
    del kept


def test_another_process_is_left_alone(fresh, monkeypatch):
    monkeypatch.delenv("SPARK_REUSE_WORKER", raising=False)
    worker_heap.freeze_once()
    assert gc.get_freeze_count() == 0
