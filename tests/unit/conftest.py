"""Fixtures of the unit tests that talk to a scripted local socket peer."""

from __future__ import annotations

import pytest

from tests.support.loopback_peer import Peer


@pytest.fixture
def peer_factory():
    """``make(script)``: a Peer running ``script`` for each connection, closed after the test."""
    peers = []

    def make(script):
        p = Peer(script)
        peers.append(p)
        return p

    yield make
    for p in peers:
        p.close()
