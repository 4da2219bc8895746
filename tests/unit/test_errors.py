"""The public errors: one module to import them from, each class with a stable prefix of its own."""

from __future__ import annotations

import importlib
import inspect
import pickle
import pkgutil
import re

import pytest

import rmq_spark
import rmq_spark.errors as public
from rmq_spark.client import errors as client_errors

CONDITION = re.compile(r"^ROCKETMQ_[A-Z_]+$")


def _public_classes() -> list[type]:
    return [c for _, c in inspect.getmembers(public, inspect.isclass) if issubclass(c, public.RocketMQError)]


def _subclasses(cls: type) -> set[type]:
    return {cls} | {s for sub in cls.__subclasses__() for s in _subclasses(sub)}


def test_every_error_of_the_package_is_importable_from_rmq_spark_errors():
    for module in pkgutil.walk_packages(rmq_spark.__path__, "rmq_spark."):
        importlib.import_module(module.name)  # every class of the hierarchy the package defines, wherever
    defined = {c for c in _subclasses(client_errors.RocketMQError) if c.__module__.startswith("rmq_spark.")}
    assert public.CommitError in defined
    assert defined <= set(_public_classes()), defined - set(_public_classes())
    for name in ("OptionError", "InvalidRowError", "CommitError", "DataLossError", "RocketMQError"):
        assert issubclass(getattr(public, name), public.RocketMQError), name
    assert set(public.__all__) == {c.__name__ for c in _public_classes()}


def test_each_public_class_has_a_prefix_of_its_own_that_its_messages_start_with():
    classes = _public_classes()
    conditions = [c.condition for c in classes]
    assert all(CONDITION.match(c) for c in conditions), conditions
    assert len(set(conditions)) == len(classes), "two classes share a prefix"
    for cls in classes:
        if cls is public.InvalidRowError:
            continue  # its own text: below
        e = cls("what went wrong")
        assert str(e) == f"[{cls.condition}] what went wrong", cls


def test_a_row_error_names_the_spark_partition_and_the_count_of_bad_rows():
    e = public.InvalidRowError("a null body", "filter the nulls", partition=3, count=2)
    assert str(e) == "[ROCKETMQ_INVALID_ROW] 2 rows of Spark partition 3 have a null body: filter the nulls"
    assert str(public.InvalidRowError("a null topic", "fill it", partition=0, count=1)) == (
        "[ROCKETMQ_INVALID_ROW] 1 row of Spark partition 0 has a null topic: fill it"
    )
    again = pickle.loads(pickle.dumps(e))
    assert (str(again), again.partition, again.count) == (str(e), 3, 2)


def test_a_prefix_names_the_class_not_its_parent():
    assert public.DataLossError.condition == "ROCKETMQ_DATA_LOSS"
    assert public.BrokerUnavailableError.condition != public.ConnectionLostError.condition
    assert str(public.OptionError("option x is bad")) == "[ROCKETMQ_INVALID_OPTION] option x is bad"


def test_a_new_class_of_the_hierarchy_must_name_its_prefix():
    with pytest.raises(TypeError, match="condition"):

        class Unnamed(public.RocketMQError):  # noqa: F841 - the class statement is what fails
            pass


def test_a_message_that_quotes_another_error_carries_only_its_own_prefix():
    inner = public.RequestTimeoutError("broker-a did not answer in 3 s")
    outer = public.BrokerUnavailableError(f"broker-a is away: {inner}")
    assert str(outer) == "[ROCKETMQ_BROKER_UNAVAILABLE] broker-a is away: broker-a did not answer in 3 s"


def test_code_and_remark_follow_the_message_and_an_error_pickles_unchanged():
    e = public.BrokerError("send refused", code=215, remark="too big")
    assert str(e) == "[ROCKETMQ_BROKER_ERROR] send refused (code 215: too big)"
    assert str(pickle.loads(pickle.dumps(e))) == str(e)
