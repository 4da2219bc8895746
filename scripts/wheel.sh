#!/usr/bin/env bash
# The release wheel: one manylinux2014 abi3 wheel (CPython 3.10 and newer, glibc 2.17 and newer, x86_64 or
# whatever this machine is) built by maturin with zig as the linker, so no docker image is needed, then checked
# with auditwheel (the platform tag is true of the compiled core) and twine (the metadata PyPI will take).
# usage: bash scripts/wheel.sh [OUT_DIR]   (default dist/); prints the wheel's path last.
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$ROOT"
OUT="$(mkdir -p "${1:-$ROOT/dist}" && cd "${1:-$ROOT/dist}" && pwd)"

rm -f "$OUT"/rmq_spark-*.whl
echo "==> building the release wheel (maturin, zig, $WHEEL_POLICY)" >&2
# set-up's editable install built the core with these same arguments (MATURIN_PEP517_ARGS): cargo finds it fresh
# shellcheck disable=SC2086
"$PY" -m maturin build --release --locked $MATURIN_PEP517_ARGS --out "$OUT" >&2 \
  || die "maturin build failed; see the errors above."
wheel="$(ls "$OUT"/rmq_spark-*-cp310-abi3-*.whl 2>/dev/null | head -n 1)"
[ -n "$wheel" ] || die "maturin wrote no cp310-abi3 wheel of rmq-spark into $OUT."

echo "==> checking $wheel" >&2
shown="$("$PY" -m auditwheel show "$wheel")" || die "auditwheel show failed on $wheel."
echo "$shown" >&2
grep -q "\"${WHEEL_POLICY}_$(uname -m)\"" <<<"$shown" \
  || die "auditwheel does not find $wheel consistent with ${WHEEL_POLICY}_$(uname -m) (its report is above)."
"$PY" -m twine check --strict "$wheel" >&2 || die "twine check failed on $wheel."
echo "$wheel"
