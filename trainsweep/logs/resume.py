"""A growing log parsed once, not once per version: a parse kept between two reads of the log.

A running job re-uploads its whole log every 30 s. Instead of parsing every version from its first
byte, ParseRun keeps the parse of the version it read (:class:`~trainsweep.logs.parser.LogParse`,
between two chunks) with how many bytes it had read, and reads the next version from there.
:func:`dump` writes that state, :func:`load` reads it back and refuses one this code cannot trust:

* another state format or another parser (:data:`PARSER_FINGERPRINT`, a hash of this package's log
  readers' source: any change to them makes old states useless, never subtly wrong);
* another run name or ``log_format`` than the caller's;
* bytes that are not a state, or a state that holds anything but the parser's own classes, arrays,
  ranges and a compiled ``log_format`` (the unpickler resolves a fixed list of names only:
  :class:`_StateUnpickler`).

The caller checks the log itself: a log shorter than what was read, or whose :data:`TAIL` bytes before
that offset are not the ones the state saw (:meth:`ParseState.tail_matches`), was replaced, not
extended, and is parsed from its start. The state's format is documented in docs/cloud.md
("Growing logs: parse states").
"""

from __future__ import annotations

import hashlib
import io
import json
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainsweep.logs.parser import LogParse

STATE_KIND = "trainsweep.parse-state"
STATE_FORMAT = 2
TAIL = 1024
"""Bytes of the log before the state's offset that a resumed read fetches again to recognise the log."""


def _fingerprint() -> str:
    h = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


PARSER_FINGERPRINT = _fingerprint()
"""A hash of the log readers' source (this folder's modules): a state from another parser is refused."""


def start(run_name: str, log_format: str | None) -> LogParse:
    """A parse of a log from its first byte that :func:`dump` can keep (it does not hash the log)."""
    return LogParse(run_name, log_format=log_format, hash_bytes=False)


@dataclass
class ParseState:
    """A parse resumed: the session, the log bytes it has read, and the last :data:`TAIL` of them."""

    session: LogParse
    offset: int
    tail_len: int
    tail_sha256: str

    def tail_matches(self, tail: bytes) -> bool:
        """Whether ``tail`` (the log's ``tail_len`` bytes before :attr:`offset`) is what the state saw."""
        return len(tail) == self.tail_len and hashlib.sha256(tail).hexdigest() == self.tail_sha256


def dump(session: LogParse, tail: bytes, run_name: str, log_format: str | None) -> bytes:
    """The state of ``session`` (not yet finished) after it read a log up to ``tail``, its last bytes."""
    tail = tail[-TAIL:]
    header = {
        "kind": STATE_KIND,
        "format": STATE_FORMAT,
        "parser": PARSER_FINGERPRINT,
        "run_name": run_name,
        "log_format": log_format,
        "offset": session.run.bytes_read,
        "tail_len": len(tail),
        "tail_sha256": hashlib.sha256(tail).hexdigest(),
    }
    return json.dumps(header, sort_keys=True).encode() + b"\n" + pickle.dumps(session, protocol=5)


def load(data: bytes, run_name: str, log_format: str | None) -> tuple[ParseState | None, str]:
    """The state in ``data`` for this run and ``log_format``; else None and why it cannot be used."""
    line, _, blob = data.partition(b"\n")
    try:
        header = json.loads(line)
    except ValueError:
        return None, "not a parse state"
    if not isinstance(header, dict) or header.get("kind") != STATE_KIND:
        return None, "not a parse state"
    if header.get("format") != STATE_FORMAT or header.get("parser") != PARSER_FINGERPRINT:
        return None, "written by another version of the parser"
    if header.get("run_name") != run_name or header.get("log_format") != log_format:
        return None, "written for another run or log_format"
    try:
        session = _StateUnpickler(io.BytesIO(blob)).load()
        state = ParseState(
            session, int(header["offset"]), int(header["tail_len"]), str(header["tail_sha256"])
        )
    except Exception as exc:  # a damaged state is a reason to parse from the start, never a failure
        return None, f"unreadable ({type(exc).__name__}: {exc})"[:300]
    if type(session) is not LogParse or session.run.bytes_read != state.offset:
        return None, "its parse does not match its header"
    return state, ""


_ALLOWED = {
    ("builtins", "range"),
    ("array", "_array_reconstructor"),
    ("array", "array"),
    ("re", "_compile"),
    ("encodings.utf_8", "IncrementalDecoder"),
    ("trainsweep.logs.parser", "LogParse"),
    ("trainsweep.logs.parser", "_TextCheck"),
    ("trainsweep.logs.model", "RunTimings"),
    ("trainsweep.logs.model", "RunHeader"),
    ("trainsweep.logs.model", "Epoch"),
    ("trainsweep.logs.model", "JoinedStamps"),
    ("trainsweep.logs.model", "Problem"),
    ("trainsweep.logs.checks", "NameFacts"),
    ("trainsweep.logs.limits", "ProblemLog"),
    ("trainsweep.logs.spill", "SpillBudget"),
    ("trainsweep.logs.cloudml", "CloudMLReader"),
    ("trainsweep.logs.mo833", "Mo833Reader"),
    ("trainsweep.logs.mlperf", "MllogReader"),
    ("trainsweep.logs.mlperf_result", "MlperfRun"),
    ("trainsweep.logs.pattern", "PatternReader"),
}


class _StateUnpickler(pickle.Unpickler):
    """Resolves only the names a parse state holds (the readers, the run model, arrays, ranges): a
    state is data, and an object that names anything else is refused rather than built."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _ALLOWED:
            raise pickle.UnpicklingError(f"a parse state does not hold {module}.{name}")
        return super().find_class(module, name)


__all__ = ["PARSER_FINGERPRINT", "TAIL", "ParseState", "dump", "load", "start"]
