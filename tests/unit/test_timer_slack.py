"""The suite's processes inherit the timer slack its conftest sets (tests/support/timer_slack.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.timer_slack import SLACK_NS


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="timer slack is Linux's")
def test_a_process_the_suite_starts_has_the_coarser_slack():
    read = "print(open('/proc/self/timerslack_ns').read().strip())"
    shown = subprocess.run([sys.executable, "-c", read], capture_output=True, text=True, check=True).stdout
    assert int(shown) == SLACK_NS
