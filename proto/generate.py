"""Generate the Python message modules of proto/ and their stubs into rmq_spark/client/grpc/v2 (or another folder).

    python proto/generate.py [--out DIR]

Needs grpcio-tools (the test extra). The generated imports are made package-absolute, so the modules load as
``rmq_spark.client.grpc.v2.*_pb2``.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from importlib import resources
from pathlib import Path

PROTO_ROOT = Path(__file__).resolve().parent
PACKAGE = "rmq_spark.client.grpc.v2"
DEFAULT_OUT = PROTO_ROOT.parent / "rmq_spark" / "client" / "grpc" / "v2"
SOURCES = ("apache/rocketmq/v2/definition.proto", "apache/rocketmq/v2/service.proto")


def generate(out: Path) -> list[Path]:
    """Write ``definition_pb2.py``, ``service_pb2.py`` and their ``.pyi`` stubs into ``out``; return their paths."""
    from grpc_tools import protoc

    well_known = resources.files("grpc_tools") / "_proto"
    out.mkdir(parents=True, exist_ok=True)
    written = []
    with tempfile.TemporaryDirectory() as tmp:
        rc = protoc.main(
            ["protoc", f"-I{PROTO_ROOT}", f"-I{well_known}", f"--python_out={tmp}", f"--pyi_out={tmp}", *SOURCES]
        )
        if rc != 0:
            raise SystemExit(f"protoc failed with exit code {rc}")
        # the message modules and their type stubs (protoc's pyi_out: what the type checker reads)
        stems = [Path(tmp) / src.replace(".proto", "_pb2") for src in SOURCES]
        for generated in (stem.with_suffix(ext) for stem in stems for ext in (".py", ".pyi")):
            text = re.sub(
                r"^from apache\.rocketmq\.v2 import ", f"from {PACKAGE} import ", generated.read_text(), flags=re.M
            )
            target = out / generated.name
            target.write_text(text)
            written.append(target)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    for path in generate(args.out):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
