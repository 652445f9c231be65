"""Journal records and their line format: one JSON object per line, crc last."""

from __future__ import annotations

import json
import math
import re
import time
import zlib
from dataclasses import dataclass
from typing import Any

RUN_STARTED = "run.started"
STEP_STARTED = "step.started"
STEP_COMPLETED = "step.completed"
SIGNAL = "signal"
RUN_COMPLETED = "run.completed"
TYPES = frozenset({RUN_STARTED, STEP_STARTED, STEP_COMPLETED, SIGNAL, RUN_COMPLETED})
KINDS = frozenset({"model", "tool", ""})

_KEYS = frozenset({"seq", "type", "step", "kind", "data", "at"})
_KEYS_CRC = _KEYS | {"crc"}
_CRC_PREFIX = b',"crc":"'
_CRC_TAIL = len(b',"crc":"00000000"}')  # 18 bytes before the newline
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
_loads = json.loads
# A step name JSON must escape (a quote, a backslash, a control character).
_NEEDS_ESCAPE = re.compile(r'[\x00-\x1f"\\]').search


@dataclass(frozen=True, slots=True)
class Record:
    """One journal entry. ``seq`` is assigned by the store; ``at`` is informational only."""

    seq: int
    type: str
    step: str
    kind: str
    data: Any
    at: float

    @classmethod
    def make(cls, type: str, step: str = "", kind: str = "", data: Any = None) -> Record:
        """A new record to append (seq 0: the store assigns it), stamped now."""
        return cls(0, type, step, kind, {} if data is None else data, time.time())

    def to_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "type": self.type,
            "step": self.step,
            "kind": self.kind,
            "data": self.data,
            "at": self.at,
        }


def encode_line(record: Record, seq: int) -> bytes:
    """The record as one crc-terminated line with ``seq``. Raises ValueError for data that is
    not plain JSON (NaN, a lone surrogate, a non-JSON type) before anything is written."""
    try:
        t, step, kind, at = record.type, record.step, record.kind, record.at
        if (
            t in TYPES
            and kind in KINDS
            and type(step) is str
            and not _NEEDS_ESCAPE(step)
            and type(at) is float
            and math.isfinite(at)
        ):
            # The line every append writes, without building a dict to encode: the same
            # bytes as the general case below (the tests hold the two to it).
            body = (
                f'{{"seq":{seq:d},"type":"{t}","step":"{step}","kind":"{kind}",'
                f'"data":{_dumps(record.data)},"at":{at!r}}}'
            ).encode()
        else:
            body = _dumps(
                {
                    "seq": seq,
                    "type": t,
                    "step": step,
                    "kind": kind,
                    "data": record.data,
                    "at": at,
                }
            ).encode()
    except (TypeError, ValueError, UnicodeEncodeError) as e:
        raise ValueError(f"record data is not plain JSON: {e}") from None
    crc = zlib.crc32(body)
    return body[:-1] + b',"crc":"%08x"}\n' % crc


class LineError(ValueError):
    """Why a line is not a valid record (the caller adds the run and the line number)."""


def line_seq(line: bytes) -> int:
    """The seq of a valid line. A line whose crc matches is byte for byte what a store wrote,
    so its seq is read from the prefix without decoding the JSON; any other line is decoded
    (and raises LineError when it is bad)."""
    if line.startswith(b'{"seq":') and line[-_CRC_TAIL:-10] == _CRC_PREFIX:
        end = line.find(b",", 7)
        digits = line[7:end]
        if end > 7 and digits.isdigit() and _crc_ok(line):
            return int(digits)
    return decode_line(line).seq


def _crc_ok(line: bytes) -> bool:
    return b"%08x" % zlib.crc32(b"}", zlib.crc32(memoryview(line)[:-_CRC_TAIL])) == line[-10:-2]


def is_whole_record(piece: bytes) -> bool:
    """True when ``piece`` (no newline) ends in a crc member that matches: the bytes are
    exactly what a store wrote for one record."""
    return (
        len(piece) > _CRC_TAIL
        and piece.endswith(b'"}')
        and piece[-_CRC_TAIL:-10] == _CRC_PREFIX
        and _crc_ok(piece)
    )


def decode_line(line: bytes) -> Record:
    """Parse one line (without its newline), checking its crc when it has one."""
    if line[-_CRC_TAIL:-10] == _CRC_PREFIX:
        want = line[-10:-2]
        got = b"%08x" % zlib.crc32(b"}", zlib.crc32(memoryview(line)[:-_CRC_TAIL]))
        if got != want:
            raise LineError(
                f"crc mismatch (line says {want.decode(errors='replace')}, "
                f"content gives {got.decode()})"
            )
    try:
        d = _loads(line.decode())
    except (ValueError, UnicodeDecodeError) as e:
        raise LineError(f"not JSON ({e})") from None
    if type(d) is not dict:
        raise LineError("not a JSON object")
    keys = d.keys()
    if keys != _KEYS and keys != _KEYS_CRC:
        missing = sorted(_KEYS - keys)
        raise LineError(f"missing keys {missing}" if missing else "unexpected keys")
    seq, typ, step, kind, at = d["seq"], d["type"], d["step"], d["kind"], d["at"]
    if type(seq) is not int or type(typ) is not str or typ not in TYPES:
        raise LineError("bad seq or type")
    if type(step) is not str or type(kind) is not str or kind not in KINDS:
        raise LineError("bad step or kind")
    if type(at) is not float and type(at) is not int:
        raise LineError("bad at")
    data = d["data"]
    if type(data) is not dict and typ != STEP_COMPLETED:  # a step's result may be any JSON
        raise LineError(f"the data of a {typ} record must be an object")
    return Record(seq, typ, step, kind, data, at)


def signal_fields(r: Record) -> tuple[str, dict[str, Any], str | None, str | None]:
    """A signal record's (name, payload, by, reason), tolerant of hand-edited shapes: a
    payload that is not an object reads as {}, by and reason that are not text as None."""
    data = r.data if isinstance(r.data, dict) else {}
    payload = data.get("payload")
    by, reason = data.get("by"), data.get("reason")
    return (
        str(data.get("name") or ""),
        payload if isinstance(payload, dict) else {},
        by if isinstance(by, str) else None,
        reason if isinstance(reason, str) else None,
    )
