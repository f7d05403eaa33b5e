"""Metrics read from a script's output, as SageMaker's ``MetricDefinitions`` define them.

A definition is ``{name, regex}``: a line of the output that the regex finds (``re.search``) gives the
metric its value, the regex's first group read as a number. The supervisor matches every line of every
process of a cell as it passes (:class:`MetricWatcher`), and turns a match into the event the run log
carries for an evaluation: ``eval_accuracy`` for an accuracy (``val_acc``, ``accuracy`` ...), else
``trainsweep.metric.<name>``, stamped with the time of the line and numbered with the epoch the run log
is in. A target (``{metric, value, direction}``) ends the cell at the first value that reaches it.

Matching is bounded: a definition is refused at plan when it does not compile, has no group, or repeats
a repetition (``(a+)+``, the shape of catastrophic backtracking), and a line is matched on its first
:data:`MATCH_CHARS` characters only.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainsweep.logs import mllog
from trainsweep.training.runlog import RunLog

MAX_DEFINITIONS = 40  # SageMaker's limit on MetricDefinitions
NAME_MAX, REGEX_MAX = 255, 500  # SageMaker's limits on a definition's Name and Regex
NAME_PATTERN = r"^[A-Za-z0-9_.:/-]+$"
MATCH_CHARS = 1024
MAX_OPEN_REPEATS = 3
ACCURACY_NAMES = mllog.ACCURACY_NAMES
MAXIMIZE, MINIMIZE = "maximize", "minimize"
_LOWER_IS_BETTER = ("loss", "error", "err", "perplexity", "ppl", "wer", "cer", "mse", "mae", "rmse")


def is_accuracy(name: str) -> bool:
    return name.lower() in ACCURACY_NAMES


def same_metric(a: str, b: str) -> bool:
    """Whether two metric names are one metric (every accuracy name is ``eval_accuracy``)."""
    return a == b or (is_accuracy(a) and is_accuracy(b))


def default_direction(name: str) -> str:
    """``minimize`` for a loss, an error or a perplexity (by its name), else ``maximize``."""
    words = re.split(r"[^a-z]+", name.lower())
    return MINIMIZE if any(w in _LOWER_IS_BETTER for w in words) else MAXIMIZE


# ---- definitions ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MetricDefinition:
    name: str
    regex: str


def _repeats(tokens: Any) -> tuple[int, bool]:
    """(open repetitions in ``tokens``, whether one repeats another) of a parsed pattern."""
    from re import _parser as sre_parse  # type: ignore[attr-defined]

    count, nested = 0, False
    for op, arg in tokens:
        subs: list[Any] = []
        if op in (sre_parse.MAX_REPEAT, sre_parse.MIN_REPEAT, sre_parse.POSSESSIVE_REPEAT):
            _lo, hi, body = arg
            inner, inner_nested = _repeats(body)
            wide = hi is sre_parse.MAXREPEAT or hi > 16
            count += int(wide) + inner
            nested = nested or inner_nested or (wide and inner > 0)
            continue
        if op is sre_parse.SUBPATTERN:
            subs = [arg[-1]]
        elif op is sre_parse.BRANCH:
            subs = list(arg[1])
        elif op in (sre_parse.ASSERT, sre_parse.ASSERT_NOT):
            subs = [arg[1]]
        elif op is sre_parse.ATOMIC_GROUP:
            subs = [arg]
        for sub in subs:
            c, n = _repeats(sub)
            count, nested = count + c, nested or n
    return count, nested


def regex_problem(regex: str) -> str | None:
    """What makes ``regex`` unusable as a metric definition's, or None: it must compile, have a group
    (the value), and not risk catastrophic backtracking."""
    from re import _parser as sre_parse  # type: ignore[attr-defined]

    if len(regex) > REGEX_MAX:
        return f"a regex has at most {REGEX_MAX} characters (SageMaker's limit)"
    try:
        compiled = re.compile(regex)
        parsed = sre_parse.parse(regex)
    except (re.error, RecursionError, OverflowError) as e:
        return f"invalid regular expression: {e}"
    if compiled.groups < 1:
        return "no group: put the value in parentheses, e.g. 'val_acc: ([0-9.]+)'"
    count, nested = _repeats(parsed)
    if nested:
        return "a repetition inside a repetition (like (a+)+) can take exponential time: flatten it"
    if count > MAX_OPEN_REPEATS:
        return f"more than {MAX_OPEN_REPEATS} open-ended repetitions (*, +, {{n,}}) make matching slow"
    return None


def parse_definitions(text: str) -> list[MetricDefinition]:
    """The definitions a job carries (a JSON list of ``{"name", "regex"}``); raises ValueError."""
    try:
        items = json.loads(text)
    except ValueError as e:
        raise ValueError(f"metric definitions are not JSON: {e}") from None
    if not isinstance(items, list) or len(items) > MAX_DEFINITIONS:
        raise ValueError(f"metric definitions must be a list of at most {MAX_DEFINITIONS} {{name, regex}}")
    out: list[MetricDefinition] = []
    for i, item in enumerate(items):
        if (
            not isinstance(item, dict)
            or not isinstance(item.get("name"), str)
            or not isinstance(item.get("regex"), str)
        ):
            raise ValueError(f"metric definition {i} is not {{name: text, regex: text}}")
        problem = regex_problem(item["regex"])
        if problem:
            raise ValueError(f"metric definition {item['name']!r}: {problem}")
        out.append(MetricDefinition(item["name"], item["regex"]))
    return out


@dataclass(frozen=True)
class TargetRule:
    """A target of a cell: the first ``metric`` value at or above (maximize) / below (minimize) ``value``."""

    metric: str
    value: float
    direction: str = MAXIMIZE

    def reached(self, v: float) -> bool:
        return v <= self.value if self.minimize else v >= self.value

    @property
    def minimize(self) -> bool:
        return self.direction == MINIMIZE

    @property
    def sign(self) -> str:
        return "<=" if self.minimize else ">="

    def describe(self) -> str:
        """``eval_accuracy 0.97`` (a value to reach), ``val_loss <= 1.2`` (a value to go below)."""
        return f"{self.metric} <= {self.value:g}" if self.minimize else f"{self.metric} {self.value:g}"

    @classmethod
    def of(cls, metric: str, value: float, *, minimize: bool = False) -> TargetRule:
        return cls(metric, value, MINIMIZE if minimize else MAXIMIZE)

    def to_json(self) -> str:
        return json.dumps({"metric": self.metric, "value": self.value, "direction": self.direction})

    @classmethod
    def from_json(cls, text: str) -> TargetRule:
        """Raises ValueError for anything but ``{metric, value, direction}``."""
        try:
            d = json.loads(text)
            rule = cls(str(d["metric"]), float(d["value"]), str(d.get("direction") or MAXIMIZE))
        except (TypeError, KeyError, ValueError) as e:
            raise ValueError(f"target is not {{metric, value, direction}}: {e}") from None
        if rule.direction not in (MAXIMIZE, MINIMIZE) or not math.isfinite(rule.value):
            raise ValueError(f"target {text!r}: direction maximize or minimize, a finite value")
        return rule


# ---- matching --------------------------------------------------------------------------------------------


def _epoch_event(raw: str) -> tuple[str, int, float | None] | None:
    """(key, epoch, time_ms) of rank 0's ``epoch_start`` / ``epoch_stop`` line, else None."""
    if not raw.startswith(mllog.TOKEN) or "epoch_st" not in raw:
        return None
    try:
        rec = mllog.parse_payload(raw[len(mllog.TOKEN) :])
        meta = rec.get("metadata") or {}
        if rec["key"] not in (mllog.EPOCH_START, mllog.EPOCH_STOP) or int(meta.get("rank") or 0) != 0:
            return None
        stamp = rec.get("time_ms")
        return rec["key"], int(meta["epoch_num"]), float(stamp) if isinstance(stamp, int | float) else None
    except (ValueError, KeyError, TypeError):
        return None


class EpochTracker:
    """The epoch a line of the output belongs to, from the epoch events rank 0's run log echoes to stdout.

    The echo and the script's own prints go through the same stdout of the same process, so their order in
    the pipe is the order they happened in (the run log file, read later, would be ahead of the line).
    """

    def __init__(self) -> None:
        self.open_epoch: int | None = None
        self.last_epoch: int | None = None

    def see(self, line: str) -> None:
        ev = _epoch_event(line)
        if ev is None:
            return
        key, epoch, _ = ev
        self.last_epoch = epoch
        self.open_epoch = epoch if key == mllog.EPOCH_START else None

    @property
    def current(self) -> int | None:
        """The open epoch, else the last closed one (an evaluation printed after its epoch closed)."""
        return self.open_epoch if self.open_epoch is not None else self.last_epoch


def _end_of_epoch(path: Path, epoch: int) -> tuple[int | None, float | None, bool]:
    """In the run log at ``path``: (the offset of the first later epoch's start, where the run ends at a
    target reached in ``epoch``; None: no later epoch), ``epoch``'s start time_ms, whether it closed."""
    start_ms: float | None = None
    closed = False
    offset = 0
    with path.open("rb") as f:
        for raw in f:
            ev = _epoch_event(raw.decode(errors="replace"))
            if ev is not None:
                key, n, stamp = ev
                if n > epoch:
                    return offset, start_ms, closed
                if n == epoch:
                    start_ms, closed = (stamp, closed) if key == mllog.EPOCH_START else (start_ms, True)
            offset += len(raw)
    return None, start_ms, closed


def _ours_until(raw: bytes, epoch: int) -> bool:
    """Whether ``raw`` is an event this module wrote (``source: output``) for ``epoch`` or before."""
    if b'"source": "output"' not in raw:
        return False
    try:
        meta = mllog.parse_payload(raw.decode()[len(mllog.TOKEN) :]).get("metadata") or {}
        return int(meta.get("epoch_num", epoch + 1)) <= epoch
    except (ValueError, TypeError, UnicodeDecodeError):
        return False


def _number(text: str | None) -> float | None:
    try:
        v = float(text) if text is not None else None
    except ValueError:
        return None
    return v if v is not None and math.isfinite(v) else None


class MetricWatcher:
    """Matches a cell's output lines against its definitions and writes the matches to its run log.

    Thread-safe: both reader threads of :class:`trainsweep.training.output.OutputCapture` call
    :meth:`line`. :attr:`reached` is set once the target's metric reaches the target.
    """

    def __init__(self, definitions: list[MetricDefinition], log_path: Path,
                 target: TargetRule | None = None) -> None:  # fmt: skip
        self.definitions = [(d, re.compile(d.regex)) for d in definitions]
        self.log_path = log_path
        self.target = target
        self.matched: dict[str, int] = {d.name: 0 for d in definitions}
        self.reached = threading.Event()
        self.reached_at: dict[str, Any] | None = None
        self.reached_wall = 0.0
        self.on_reached: Callable[[], None] | None = None
        """Called (from a reader thread) when the target is reached: the supervisor ends the cell."""
        self.epochs = EpochTracker()
        self._lock = threading.Lock()

    def line(self, stream: str, text: str) -> None:
        if text.startswith(mllog.TOKEN):
            if stream == "stdout":
                with self._lock:
                    self.epochs.see(text)
            return  # the instrumentation's own echo
        if text.startswith("trainsweep: "):
            return
        text = text[:MATCH_CHARS]
        for d, rx in self.definitions:
            m = rx.search(text)
            value = _number(m.group(1)) if m else None
            if value is not None:
                with self._lock:
                    self._record(d.name, value)

    def _record(self, name: str, value: float) -> None:
        self.matched[name] += 1
        epoch = self.epochs.current
        if epoch is None:
            return  # before the first training step: no epoch's evaluation (a sanity check)
        key = mllog.EVAL_ACCURACY if is_accuracy(name) else mllog.METRIC_PREFIX + name
        with RunLog(self.log_path, echo=False) as log:
            log.event(key, value, time_ms=time.time() * 1000, epoch_num=epoch, source="output")
        t = self.target
        if t is not None and self.reached_at is None and same_metric(name, t.metric) and t.reached(value):
            self.reached_at = {"metric": name, "target": t.value, "value": value, "epoch": epoch}
            self.reached_wall = time.time()
            self.reached.set()
            if self.on_reached is not None:
                self.on_reached()

    def unmatched(self) -> list[str]:
        """The definitions no line matched."""
        return [name for name, n in self.matched.items() if n == 0]

    def finish_at_target(self) -> None:
        """The cell was ended at its target: its log ends where the line that reached it was printed (what
        the process wrote later, on its way to being stopped, is cut), the open epoch closes then, and
        the log says the target was reached and the run ended well (the killed process could not)."""
        r = self.reached_at
        assert r is not None
        epoch = int(r["epoch"])
        try:
            cut, start_ms, closed = _end_of_epoch(self.log_path, epoch)
            if cut is not None:
                with self.log_path.open("r+b") as f:
                    f.seek(cut)
                    ours = [ln for ln in f.read().splitlines(keepends=True) if _ours_until(ln, epoch)]
                    f.truncate(cut)
                    f.seek(cut)
                    f.write(b"".join(ours))  # the evaluations read from lines printed before the target
        except OSError:
            start_ms, closed = None, True
        now = self.reached_wall
        with RunLog(self.log_path, echo=False) as log:
            if not closed and start_ms is not None:
                log.event(mllog.EPOCH_TIME, max(0.0, now - start_ms / 1000), epoch_num=epoch)
                log.event(mllog.EPOCH_STOP, event_type=mllog.END, time_ms=now * 1000, epoch_num=epoch)
            log.line(f"Target {r['metric']} {r['target']:g} reached after epoch {r['epoch']}: {r['value']:g}")
            log.event(mllog.TARGET_REACHED, r)
            log.event(mllog.RUN_STOP, status="success")

    def say_unmatched(self) -> list[str]:
        """Write the definitions that never matched to the run log; returns the cell's flags for them."""
        names = self.unmatched()
        if not names:
            return []
        regexes = {d.name: d.regex for d, _ in self.definitions}
        with RunLog(self.log_path, echo=False) as log:
            log.event(mllog.METRIC_UNMATCHED, [{"metric": n, "regex": regexes[n]} for n in names])
        return [f"metric {n} never matched the output (regex {regexes[n]!r})" for n in names]
