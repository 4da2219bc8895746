#!/usr/bin/env bash
# The whole test suite on a fresh machine: set-up, then pytest (unit and real-broker integration tests).
# Extra arguments go to pytest. pytest's exit code is ours: 5 (no tests ran) fails like any other.
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$ROOT"
exec "$PY" -m pytest "$@"
