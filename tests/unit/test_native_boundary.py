"""The boundary with the compiled core: its stub (``rmq_spark/_native.pyi``) names what the module exports, with
the parameters its functions take; the core's errors each become one of the package's; its statuses are one object
each; the constants Python reads are the core's."""

from __future__ import annotations

import ast
import inspect
import logging
import pickle
from pathlib import Path

import pytest

import rmq_spark._native as native
from rmq_spark.client import errors
from rmq_spark.client.core_errors import package_error
from rmq_spark.client.remoting import codes
from rmq_spark.compiled import PullStatus
from rmq_spark.sink import retry

STUB = Path(native.__file__).parent / "_native.pyi"


def _stub() -> ast.Module:
    return ast.parse(STUB.read_text())


def _public(names) -> set[str]:
    return {n for n in names if not n.startswith("__") or n == "__arrow_c_array__"}


def _members(body: list[ast.stmt]) -> dict[str, ast.AST]:
    out = {}
    for node in body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            out[node.name] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out[node.target.id] = node
    return out


def _runtime_members(cls: type) -> set[str]:
    return _public(vars(cls)) - {"__match_args__"}


def _parameters(fn: ast.FunctionDef) -> list[tuple[str, bool, bool]]:
    """(name, keyword-only, has a default) of each parameter but self."""
    a = fn.args
    positional = [p for p in a.posonlyargs + a.args if p.arg != "self"]
    defaults = [False] * (len(positional) - len(a.defaults)) + [True] * len(a.defaults)
    return [(p.arg, False, d) for p, d in zip(positional, defaults)] + [
        (p.arg, True, d is not None) for p, d in zip(a.kwonlyargs, a.kw_defaults)
    ]


def _runtime_parameters(obj) -> list[tuple[str, bool, bool]]:
    params = [p for p in inspect.signature(obj).parameters.values() if p.name != "self"]
    return [(p.name, p.kind is p.KEYWORD_ONLY, p.default is not p.empty) for p in params]


def _check_class(stub: ast.ClassDef, cls: type, where: str) -> None:
    members = _members(stub.body)
    assert _public(members) - {"__init__"} == _runtime_members(cls), where
    for name, node in members.items():
        if isinstance(node, ast.ClassDef):
            _check_class(node, getattr(cls, name), f"{where}.{name}")
        elif isinstance(node, ast.FunctionDef) and not any(
            isinstance(d, ast.Name) and d.id == "property" for d in node.decorator_list
        ):
            target = cls if name == "__init__" else getattr(cls, name)
            assert _parameters(node) == _runtime_parameters(target), f"{where}.{name}"


def test_the_stub_names_every_export_of_the_core_with_its_parameters():
    top = _members(_stub().body)
    assert set(top) == _public(dir(native))
    for name, node in top.items():
        if isinstance(node, ast.ClassDef):
            _check_class(node, getattr(native, name), name)
        elif isinstance(node, ast.FunctionDef):
            assert _parameters(node) == _runtime_parameters(getattr(native, name)), name


def test_the_stub_and_py_typed_are_in_the_package():
    assert (STUB.parent / "py.typed").is_file()


def test_each_error_of_the_core_becomes_one_of_the_package_with_its_text():
    expected = {
        native.MalformedError: errors.ProtocolError,
        native.PipeLostError: errors.ConnectionLostError,
        native.PipeTimeoutError: errors.RequestTimeoutError,
        native.DataLostError: errors.DataLossError,
        native.RefusedError: errors.RocketMQError,
        native.UnavailableError: errors.BrokerUnavailableError,
    }
    assert set(native.CoreError.__subclasses__()) == set(expected)
    for core, package in expected.items():
        error = package_error(core("what went wrong"))
        assert type(error) is package and str(error) == f"[{package.condition}] what went wrong"
        assert str(package_error(core("x"), "said otherwise")) == f"[{package.condition}] said otherwise"


def test_a_malformed_frame_is_a_protocol_error_naming_the_fault():
    from rmq_spark.client.remoting.frame import decode_frame

    with pytest.raises(errors.ProtocolError) as caught:
        decode_frame(b"\x00\x00")
    assert not isinstance(caught.value, native.CoreError) and caught.value.__cause__ is None


def test_each_pull_status_is_one_object_named_as_its_attribute():
    statuses = [
        PullStatus.FOUND,
        PullStatus.NO_NEW_MSG,
        PullStatus.NO_MATCHED_MSG,
        PullStatus.RETRY_IMMEDIATELY,
        PullStatus.OFFSET_ILLEGAL,
    ]
    assert len(set(statuses)) == 5
    for status in statuses:
        assert getattr(PullStatus, status.name) is status
        assert pickle.loads(pickle.dumps(status)) is status
    assert native.pull_status(codes.SUCCESS, None, 5, 0) is PullStatus.FOUND
    assert native.pull_status(codes.PULL_NOT_FOUND, None, 0, 0) is PullStatus.NO_NEW_MSG
    assert native.pull_status(codes.PULL_RETRY_IMMEDIATELY, codes.NO_MATCHED_MESSAGE, 5, 0) is PullStatus.NO_MATCHED_MSG
    assert native.pull_status(codes.PULL_RETRY_IMMEDIATELY, "OFFSET_IN_ERROR", 5, 0) is PullStatus.RETRY_IMMEDIATELY
    assert native.pull_status(codes.PULL_OFFSET_MOVED, None, 0, 0) is PullStatus.OFFSET_ILLEGAL
    assert native.pull_status(codes.SYSTEM_BUSY, None, 0, 0) is None


def test_the_pull_codes_python_reads_are_the_cores():
    for name in ("SUCCESS", "PULL_NOT_FOUND", "PULL_RETRY_IMMEDIATELY", "PULL_OFFSET_MOVED", "NO_MATCHED_MESSAGE"):
        assert getattr(codes, name) is getattr(native, name)


def test_one_backoff_schedule_for_the_cursor_and_the_sink(monkeypatch):
    assert [native.backoff_delay(n) for n in range(8)] == [0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 2.0, 2.0]
    slept = []
    monkeypatch.setattr(retry.time, "sleep", slept.append)
    tries = retry.Retries(timeout=60)
    for _ in range(8):
        tries.wait(errors.BrokerBusyError("busy"), "a send")
    assert slept == [native.backoff_delay(n) for n in range(8)]


def test_the_data_loss_rule_is_worded_by_the_core_for_planning_too(caplog):
    from rmq_spark.client.model import MessageQueue
    from rmq_spark.source.planning import check_data_loss

    mq = MessageQueue("T", "b", 0)
    with pytest.raises(errors.DataLossError) as caught:
        check_data_loss(mq, 3, 5, True)
    assert str(caught.value).endswith(
        "[3, 5) were deleted before they were read. Set failOnDataLoss=false to start at the first available offset."
    )
    with caplog.at_level(logging.WARNING, logger="rmq_spark.source.planning"):
        assert check_data_loss(mq, 3, 5, False) == 5
    assert caplog.records[-1].getMessage().endswith("read; starting at 5 (failOnDataLoss=false)")
