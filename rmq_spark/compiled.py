"""The compiled core (``rmq_spark._native``, built from ``native/``), or an ImportError that says how to build it."""
from __future__ import annotations

try:
    from rmq_spark._native import (BlockGatherer, BodyTooLargeError, FramePipe, RangeCursor, RequestTemplate,
                                   decode_frame, encode_frame, first_offset, pull_status, v2_queue_offset)
except ImportError as e:  # pragma: no cover - the set-up script builds it
    raise ImportError("rmq_spark._native, the compiled core, is not built: install rmq-spark with pip (a release "
                      "wheel, or 'pip install .' in a checkout, which builds it with cargo), or run scripts/setup.sh"
                      ) from e

__all__ = ["BlockGatherer", "BodyTooLargeError", "FramePipe", "RangeCursor", "RequestTemplate", "decode_frame",
           "encode_frame", "first_offset", "pull_status", "v2_queue_offset"]
