"""Comparing the Arrow batches the decoders build with the ones expected."""

from __future__ import annotations

import pyarrow as pa


def assert_same(got: pa.RecordBatch, want: pa.RecordBatch, *, unordered_maps: bool = False) -> None:
    """``got`` is valid and equals ``want``: the same schema (metadata included) and rows. Column by column, the
    same layout too (e.g. nulls where ``want`` has nulls); with ``unordered_maps`` the rows alone, the entries of the
    properties map compared sorted (a protobuf map has no order)."""
    got.validate(full=True)
    assert got.schema.equals(want.schema, check_metadata=True), (got.schema, want.schema)
    if unordered_maps:

        def rows(batch: pa.RecordBatch) -> list[dict]:
            return [
                {**r, **({"properties": sorted(r["properties"])} if "properties" in r else {})}
                for r in batch.to_pylist()
            ]

        assert rows(got) == rows(want)
    elif not got.equals(want):  # show the differing rows, else the column whose layout differs
        assert got.to_pylist() == want.to_pylist()
        for name in want.schema.names:
            assert got.column(name).equals(want.column(name)), name
