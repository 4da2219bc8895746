"""Errors at a broker address the user never typed (behind RocketMQ 5's proxy, the address it advertises) name the
name server the user gave as well; errors at that name server stay as they are."""

from __future__ import annotations

from rmq_spark.client.errors import AuthError, ConnectionLostError, OffsetMovedError
from rmq_spark.client.remoting.client import RemotingClient

GIVEN = "proxy.example.com:8080"
ADVERTISED = "10.1.2.3:8080"


def test_a_connection_error_at_an_advertised_address_names_the_given_name_server():
    with RemotingClient(GIVEN) as client:
        e = client.routed(ConnectionLostError(f"cannot connect to {ADVERTISED}: refused"), ADVERTISED)
    assert isinstance(e, ConnectionLostError)
    assert ADVERTISED in str(e) and f"name server {GIVEN} (option nameServer)" in str(e)
    assert "remotingAccessAddr" in str(e)


def test_a_refusal_keeps_its_class_code_and_remark_and_gets_the_note_once():
    with RemotingClient(GIVEN) as client:
        refused = AuthError(f"pull failed at {ADVERTISED}", code=16, remark="no permission")
        e = client.routed(refused, ADVERTISED)
        assert isinstance(e, AuthError) and (e.code, e.remark) == (16, "no permission")
        assert GIVEN in str(e) and str(e).count("(code 16") == 1
        assert client.routed(e, ADVERTISED) is e


def test_errors_at_the_given_address_and_errors_with_fields_of_their_own_are_unchanged():
    with RemotingClient(GIVEN) as client:
        at_given = ConnectionLostError(f"cannot connect to {GIVEN}: refused")
        assert client.routed(at_given, GIVEN) is at_given
        moved = OffsetMovedError("moved", min_offset=3)
        assert client.routed(moved, ADVERTISED) is moved
