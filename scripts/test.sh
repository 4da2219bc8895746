#!/usr/bin/env bash
# The whole test suite on a fresh machine: set-up, the lint and format check (ruff, pyproject.toml's [tool.ruff]),
# the type check (mypy, [tool.mypy]), then pytest (unit and real-broker integration tests). Extra arguments go to
# pytest. A lint, format or type error fails the run before any test; otherwise pytest's exit code is ours: 5 (no
# tests ran) fails like any other.
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$ROOT"
echo "==> lint and format check (ruff)"
"$PY" -m ruff check . || die "ruff found lint errors (above): fix them, many with ruff check --fix (CONTRIBUTING.md)."
"$PY" -m ruff format --check . || die "files are not formatted (above): run ruff format (CONTRIBUTING.md)."
echo "==> type check (mypy)"
"$PY" -m mypy || die "mypy found type errors (above): fix them before the tests run (CONTRIBUTING.md, \"Type check\")."
exec "$PY" -m pytest "$@"
