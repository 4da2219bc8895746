#!/usr/bin/env bash
# Sourced by scripts/demo.sh and scripts/test.sh: checks the prerequisites, creates the virtualenv, installs
# rmq-spark with its test dependency group (when pyproject.toml changed; maturin builds the native core, again when its sources
# changed), compiles the checkout's bytecode and builds jvm-shim (when its sources changed).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${RMQ_SPARK_VENV:-$ROOT/.venv}"

die() { echo "error: $*" >&2; exit 1; }

PYTHON="${PYTHON:-python3}"
command -v "$PYTHON" >/dev/null 2>&1 || die "python3 was not found: install Python 3.10 or newer."
"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
  || die "$("$PYTHON" --version 2>&1) is too old: install Python 3.10 or newer."
command -v java >/dev/null 2>&1 || die "java was not found: install a JDK 17 or newer (e.g. apt-get install openjdk-17-jdk-headless)."
java_major=$(java -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p')
[ "${java_major%%.*}" -ge 17 ] 2>/dev/null || die "java ${java_major:-?} is too old: install a JDK 17 or newer."
command -v mvn >/dev/null 2>&1 || die "mvn was not found: install Apache Maven (e.g. apt-get install maven)."
command -v cargo >/dev/null 2>&1 \
  || die "cargo was not found: install Rust 1.77 or newer (rustup, or e.g. apt-get install cargo); it builds the native core."

if [ ! -x "$VENV/bin/python" ]; then
  echo "==> creating virtualenv $VENV"
  "$PYTHON" -m venv "$VENV"
fi
# activated, as it were: maturin runs itself and zig from PATH (the release dependency group installs both here)
export PATH="$VENV/bin:$PATH" VIRTUAL_ENV="$VENV"
stamp="$VENV/.rmq-spark-installed"
native_lib="$ROOT/rmq_spark/_native.abi3.so"
# The native core is built as the release wheel builds it (scripts/wheel.sh): linked by zig for the wheel's
# manylinux policy, so the tests run the binary users install, and the wheel's build finds cargo's output fresh
# instead of compiling the core a second time.
WHEEL_POLICY=manylinux_2_17
export MATURIN_PEP517_ARGS="--zig --compatibility $WHEEL_POLICY"
if [ ! -f "$stamp" ] || [ "$ROOT/pyproject.toml" -nt "$stamp" ]; then
  echo "==> installing rmq-spark's test dependency group, then rmq-spark (editable: maturin builds the native core) into $VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
  # the release group first: the maturin and zig that build the core
  "$VENV/bin/python" -m pip install -q --group "$ROOT/pyproject.toml:release" \
    || die "installing rmq-spark's release dependency group (maturin, zig) into $VENV failed; see the errors above."
  # cargo builds the core while pip installs the rest of the test group (about 40 s each on two cores); the
  # editable install below finds cargo's output fresh
  native_log="$(mktemp)"
  # shellcheck disable=SC2086
  (cd "$ROOT" && exec "$VENV/bin/python" -m maturin build --release $MATURIN_PEP517_ARGS) >"$native_log" 2>&1 &
  native_pid=$!
  "$VENV/bin/python" -m pip install -q --group "$ROOT/pyproject.toml:test" \
    || { kill "$native_pid" 2>/dev/null; die "installing rmq-spark's test dependency group into $VENV failed; see the errors above."; }
  wait "$native_pid" \
    || { cat "$native_log" >&2; die "building the native core failed (maturin, cargo in $ROOT/native); see cargo's errors above."; }
  rm -f "$native_log"
  # maturin's editable install puts the checkout on sys.path (Spark's discovery of pyspark_* modules then sees
  # pyspark_rocketmq) and the built core beside its Python modules, in rmq_spark/
  "$VENV/bin/python" -m pip install -q --no-build-isolation -e "$ROOT" \
    || die "installing rmq-spark into $VENV failed; see the errors above (cargo's, if the native core did not build)."
  touch "$stamp"
elif [ ! -f "$native_lib" ] || [ -n "$(find "$ROOT/native/src" "$ROOT/native/Cargo.toml" "$ROOT/native/Cargo.lock" \
                                           -newer "$native_lib" -print -quit)" ]; then
  echo "==> rebuilding the native core (its sources changed)"
  "$VENV/bin/python" -m pip install -q --no-deps --no-build-isolation -e "$ROOT" \
    || die "building the native core failed (maturin, cargo in $ROOT/native); see the errors above."
fi
# The checkout's bytecode (what changed since the last run): this machine and many CIs set PYTHONDONTWRITEBYTECODE,
# and pip compiles installed packages only, so every Python process (each Spark worker) compiled ours from source:
# about 0.12 s of CPU each.
"$VENV/bin/python" -m compileall -q -j 0 "$ROOT/rmq_spark" "$ROOT/pyspark_rocketmq" "$ROOT/rmq_spark_testing" \
  "$ROOT/tests" "$ROOT/benchmarks" || die "compiling the checkout's Python files failed (above)."
echo "==> building jvm-shim (when missing or stale)"
"$VENV/bin/python" -m rmq_spark_testing.embedded --build >/dev/null
PY="$VENV/bin/python"
