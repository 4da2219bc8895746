#!/usr/bin/env bash
# The main job on a fresh machine: set-up, then the demo on the embedded RocketMQ.
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$ROOT"
exec "$PY" -m rmq_spark_testing.demo "$@"
