"""Server addresses: one parser of host:port for the options, the name server list and both transports."""

from __future__ import annotations

import pytest

from rmq_spark.client import RocketMQError
from rmq_spark.client.addresses import address_list, host_port


def test_host_port():
    assert host_port("gw:8081") == ("gw", 8081) and host_port(" [::1]:9 ") == ("::1", 9)
    for bad in ("gw", "gw:", ":1", "gw:x", "gw:70000", "gw:0"):
        with pytest.raises(RocketMQError, match=f"endpoint '{bad}' is not host:port"):
            host_port(bad, "endpoint")


def test_address_list_splits_on_semicolons_and_commas_and_checks_each():
    assert address_list("a:1; b:2,c:3;") == ["a:1", "b:2", "c:3"]
    with pytest.raises(ValueError, match="address 'b' is not host:port"):
        address_list("a:1;b")
