#!/usr/bin/env bash
# The whole test suite on a fresh machine: set-up, the lint and format check (ruff, pyproject.toml's [tool.ruff]),
# the type check (mypy, [tool.mypy]), then pytest (unit and real-broker integration tests). Extra arguments go to
# pytest. A lint, format or type error fails the run before any test; otherwise pytest's exit code is ours: 5 (no
# tests ran) fails like any other. Without arguments (the whole suite, as CI runs it) tests/stock and tests/deploy,
# which spend most of their time waiting on processes of their own (released brokers, a wheel build, a standalone
# cluster), run in a second pytest beside the others, with the benchmark harness's smoke tests (their own clusters)
# and the static-topic tests (a remapping, 40 s), which even the two out: otherwise the first ran its last minutes
# alone, on one core. A third process (the
# kill and benchmark-harness tests apart) made no run shorter: the suite is CPU-bound on two cores, and the heavier load starved Spark's Python workers past
# the 10 s they have to connect back. The BESIDE groups' output follows the first's; the run fails when any fails.
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$ROOT"
echo "==> lint and format check (ruff)"
"$PY" -m ruff check . || die "ruff found lint errors (above): fix them, many with ruff check --fix (CONTRIBUTING.md)."
"$PY" -m ruff format --check . || die "files are not formatted (above): run ruff format (CONTRIBUTING.md)."
echo "==> type check (mypy)"
"$PY" -m mypy || die "mypy found type errors (above): fix them before the tests run (CONTRIBUTING.md, \"Type check\")."
[ "$#" -eq 0 ] || exec "$PY" -m pytest "$@"

# each group a pytest of its own beside the rest
BESIDE=("tests/stock tests/deploy tests/integration/test_benchmarks_smoke.py tests/integration/test_static_topics.py")
logs=() pids=() ignore=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -f "${logs[@]}"' EXIT
for group in "${BESIDE[@]}"; do
  read -ra paths <<<"$group"
  ignore+=("${paths[@]/#/--ignore=}")
  logs+=("$(mktemp)")
  "$PY" -m pytest "${paths[@]}" >"${logs[-1]}" 2>&1 &
  pids+=("$!")
done
rc=0
"$PY" -m pytest "${ignore[@]}" || rc=$?
for i in "${!BESIDE[@]}"; do
  group_rc=0
  wait "${pids[$i]}" || group_rc=$?
  echo "==> ${BESIDE[$i]} (run beside the tests above; exit code $group_rc)"
  cat "${logs[$i]}"
  [ "$rc" -ne 0 ] || rc=$group_rc
done
exit "$rc"
