#!/usr/bin/env bash
# Sourced by scripts/demo.sh and scripts/test.sh: checks the prerequisites, creates the virtualenv, installs
# rmq-spark with its test extra (when pyproject.toml changed) and builds jvm-shim (when its sources changed).
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
stamp="$VENV/.rmq-spark-installed"
if [ ! -f "$stamp" ] || [ "$ROOT/pyproject.toml" -nt "$stamp" ]; then
  echo "==> installing rmq-spark and its test extra into $VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
  # compat mode puts the checkout on sys.path, so Spark's discovery of pyspark_* modules sees pyspark_rocketmq
  "$VENV/bin/python" -m pip install -q -e "$ROOT[test]" --config-settings editable_mode=compat
  touch "$stamp"
fi
# The native core (native/, Rust): built into the package when missing or older than its sources.
native_lib="$ROOT/rmq_spark/_native.abi3.so"
if [ ! -f "$native_lib" ] || [ -n "$(find "$ROOT/native/src" "$ROOT/native/Cargo.toml" "$ROOT/native/Cargo.lock" \
                                         -newer "$native_lib" -print -quit)" ]; then
  echo "==> building the native core (cargo build --release)"
  (cd "$ROOT/native" && cargo build --release --locked --quiet --features extension-module) \
    || die "building the native core failed (cargo build in $ROOT/native); see the errors above."
  cp "$ROOT/native/target/release/lib_native.so" "$native_lib.tmp" && mv "$native_lib.tmp" "$native_lib"
fi
echo "==> building jvm-shim (when missing or stale)"
"$VENV/bin/python" -m rmq_spark.embedded --build >/dev/null
PY="$VENV/bin/python"
