#!/usr/bin/env bash
# The whole test suite on a fresh machine: set-up, the lint and format check (ruff, pyproject.toml's [tool.ruff]),
# the type check (mypy, [tool.mypy]), then pytest (unit and real-broker integration tests). Extra arguments go to
# pytest. A lint, format or type error fails the run before any test; otherwise pytest's exit code is ours: 5 (no
# tests ran) fails like any other. Without arguments (the whole suite, as CI runs it) tests/stock and tests/deploy,
# which spend most of their time waiting on processes of their own (released brokers, a wheel build, a standalone
# cluster), run in a second pytest beside the others: the suite fits CI's time budget on two cores. Its output
# follows the first's; the run fails when either fails.
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$ROOT"
echo "==> lint and format check (ruff)"
"$PY" -m ruff check . || die "ruff found lint errors (above): fix them, many with ruff check --fix (CONTRIBUTING.md)."
"$PY" -m ruff format --check . || die "files are not formatted (above): run ruff format (CONTRIBUTING.md)."
echo "==> type check (mypy)"
"$PY" -m mypy || die "mypy found type errors (above): fix them before the tests run (CONTRIBUTING.md, \"Type check\")."
[ "$#" -eq 0 ] || exec "$PY" -m pytest "$@"

BESIDE=(tests/stock tests/deploy)
beside_log="$(mktemp)"
"$PY" -m pytest "${BESIDE[@]}" >"$beside_log" 2>&1 &
beside=$!
trap 'kill "$beside" 2>/dev/null || true; rm -f "$beside_log"' EXIT
rc=0
"$PY" -m pytest "${BESIDE[@]/#/--ignore=}" || rc=$?
beside_rc=0
wait "$beside" || beside_rc=$?
echo "==> ${BESIDE[*]} (run beside the tests above; exit code $beside_rc)"
cat "$beside_log"
[ "$rc" -eq 0 ] || exit "$rc"
exit "$beside_rc"
