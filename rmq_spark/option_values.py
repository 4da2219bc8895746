"""One option's string value parsed: booleans, integers, choices, durations. Every error names the option and
what it accepts."""

from __future__ import annotations

import re
from collections.abc import Mapping

from rmq_spark.errors import OptionError
from rmq_spark.option_table import Option


def parse_bool(name: str, value: str) -> bool:
    """``true`` or ``false``, any case."""
    v = value.strip().lower()
    if v in ("true", "false"):
        return v == "true"
    raise OptionError(f"option {name} must be true or false, not {value!r}")


def parse_int(name: str, value: str, *, minimum: int | None = None) -> int:
    """An integer, at least ``minimum`` when given."""
    try:
        n = int(value.strip())
    except ValueError:
        raise OptionError(f"option {name} must be an integer, not {value!r}") from None
    if minimum is not None and n < minimum:
        raise OptionError(f"option {name} must be at least {minimum}, not {n}")
    return n


def parse_choice(name: str, value: str, choices: tuple[str, ...]) -> str:
    """One of ``choices``, any case, spelled as the choice is."""
    v = value.strip().lower()
    for c in choices:
        if v == c.lower():
            return c
    raise OptionError(f"option {name} must be one of {', '.join(choices)}, not {value!r}")


def choice(option: Option, opts: Mapping[str, str], *, dashes: bool = False) -> str:
    """Option ``option``'s value in ``opts`` (its default when absent), one of its choices; with ``dashes``, a
    ``-`` is read as ``_`` (Spark users write ``exactly-once``)."""
    value = opts.get(option.name, str(option.default))
    return parse_choice(option.name, value.replace("-", "_") if dashes else value, option.choices)


_DURATION = re.compile(r"^\s*(\d+)\s*([a-z]+)?\s*$", re.I)
# Spark's time suffixes (JavaUtils.timeStringAsMs); a bare number is milliseconds, as there
_MS_PER_UNIT = {"us": 0.001, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000, None: 1}


def parse_duration_ms(name: str, value: str) -> int:
    """A duration as Spark's ``timeStringAsMs`` reads it ('15m', '30s', '500ms', '250us', or a bare number of
    milliseconds) → milliseconds."""
    m = _DURATION.match(value)
    unit = m.group(2).lower() if m and m.group(2) else None
    if not m or unit not in _MS_PER_UNIT:
        raise OptionError(
            f"option {name} must be a duration such as 500ms, 30s, 15m, 1h or a number of "
            f"milliseconds (Spark's time suffixes: us, ms, s, m, min, h, d), not {value!r}"
        )
    return int(int(m.group(1)) * _MS_PER_UNIT[unit])
