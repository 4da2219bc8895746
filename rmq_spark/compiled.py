"""The compiled core (``rmq_spark._native``, built from ``native/``), or an ImportError that says how to build it."""

from __future__ import annotations

try:
    from rmq_spark._native import (
        NO_MATCHED_MESSAGE,
        PULL_NOT_FOUND,
        PULL_OFFSET_MOVED,
        PULL_RETRY_IMMEDIATELY,
        SUCCESS,
        ArrowColumn,
        BlockGatherer,
        BodyTooLargeError,
        CoreError,
        DataLostError,
        Frame,
        FramePipe,
        HoldEnd,
        HoldLine,
        MalformedError,
        PipeLostError,
        PipeTimeoutError,
        PullStatus,
        RangeCursor,
        RefusedError,
        RequestTemplate,
        Step,
        UnavailableError,
        UnreadableError,
        backoff_delay,
        data_loss_error,
        data_loss_note,
        decode_frame,
        encode_frame,
        first_offset,
        pull_status,
        v2_queue_offset,
    )
except ImportError as e:  # pragma: no cover - the set-up script builds it
    raise ImportError(
        "rmq_spark._native, the compiled core, is not built: install rmq-spark with pip (a release "
        "wheel, or 'pip install .' in a checkout, which builds it with cargo), or run scripts/setup.sh"
    ) from e

__all__ = [
    "NO_MATCHED_MESSAGE",
    "PULL_NOT_FOUND",
    "PULL_OFFSET_MOVED",
    "PULL_RETRY_IMMEDIATELY",
    "SUCCESS",
    "ArrowColumn",
    "BlockGatherer",
    "BodyTooLargeError",
    "CoreError",
    "DataLostError",
    "Frame",
    "FramePipe",
    "HoldEnd",
    "HoldLine",
    "MalformedError",
    "PipeLostError",
    "PipeTimeoutError",
    "PullStatus",
    "RangeCursor",
    "RefusedError",
    "RequestTemplate",
    "Step",
    "UnavailableError",
    "UnreadableError",
    "backoff_delay",
    "data_loss_error",
    "data_loss_note",
    "decode_frame",
    "encode_frame",
    "first_offset",
    "pull_status",
    "v2_queue_offset",
]
