#!/usr/bin/env bash
# The whole test suite on a fresh machine: set-up, the type check (mypy, as pyproject.toml's [tool.mypy] says),
# then pytest (unit and real-broker integration tests). Extra arguments go to pytest. A type error fails the run
# before any test; otherwise pytest's exit code is ours: 5 (no tests ran) fails like any other.
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$ROOT"
echo "==> type check (mypy)"
"$PY" -m mypy || die "mypy found type errors (above): fix them before the tests run (CONTRIBUTING.md, \"Type check\")."
exec "$PY" -m pytest "$@"
