"""The cloud-ML seed dialect: Keras callback prints from the FCN, MNIST and ResNet training scripts.

Three generations of the same script print, one per line (Python 2 and 3 number forms, with and without
the ``s`` unit)::

    ('Tempo de inicializacao: ', 0.206)  |  Initialization time 3.86  |  Tempo de Inicializacao: 15.7
    Epoch 1/5
    Real time: 1592371754.45
    37 step training time: 0.2518s          (oldest logs: the last step as ``40 steps training: 2.58s``)
    on_epoch_begin: / on_epoch_end: / on_train_batch_begin: ... (Unix stamps)
    40512/40512 [=====] - 11s ... - val_accuracy: 0.9717   (tf.keras: printed *after* ``Epoch time:``)
    Validation time: 0.0149s
    Epoch time: 11.01s
    Tempo do fit: 61.04 / Tempo levado para o modelo ser salvo: 0.12 / Duracao do treinamento: 61.37

An epoch ends at ``Epoch time:``. Wall-clock stamps seen between two epochs belong to the next one;
a ``val_accuracy`` seen after ``Epoch time:`` belongs to the epoch just closed; nothing after the last
``Epoch time:`` opens a new epoch.
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from trainsweep.logs import checks, native
from trainsweep.logs.cloudml_lines import (
    BANNER_FIELDS,
    BAR_WINDOW,
    CMD,
    CMD_OPT,
    CMD_WINDOW,
    EXC_LINE,
    FIRST_BAR,
    KIND_OF,
    LAST_STEP_LIT,
    RARE,
    RARE_STARTS,
    REAL,
    REAL_LIT,
    RUN_TIMES,
    STEP,
    STEP_ANY,
    STEP_LINE,
    STEP_LIT,
    TB_WINDOW,
    VACC,
    VACC_LIT,
)
from trainsweep.logs.cloudml_steps import (
    add_step_numbers,
    compact,
    extend_doubles,
    lines_with,
    plain_values,
    step_numbers,
)
from trainsweep.logs.limits import MAX_EPOCHS, ProblemLog
from trainsweep.logs.lines import LineCounter
from trainsweep.logs.model import Epoch, JoinedStamps, RunHeader, RunTimings
from trainsweep.logs.numbers import (
    MAX_DURATION_S,
    STEP_NUMBER_DIGITS,
    duration_problem,
    small_int,
    step_number_problem,
    timestamp_problem,
)
from trainsweep.logs.spill import SpillBudget

DIALECT = "cloud-ml"
ACCURACY_AFTER_EPOCH_TIME = "cloudml.accuracy_after_epoch_time"
"""``run.extra`` key: True when ``val_accuracy`` was printed after ``Epoch time:`` (tf.keras logs)."""


class CloudMLReader:
    """Reads the cloud-ML lines of a log, region by region, into epochs and run-level values."""

    name: ClassVar[str] = DIALECT
    precedence: ClassVar[int] = 2

    def __init__(self) -> None:
        self.epochs: list[Epoch] = []
        self.header = RunHeader()
        self.init_s: float | None = None
        self.fit_s: float | None = None
        self.total_s: float | None = None
        self.model_save_s: float | None = None
        self.real_time: JoinedStamps = JoinedStamps([])
        """Every wall-clock stamp, set by :meth:`finish`: a view of the epochs' stamps (8 bytes a stamp,
        held once; EC2 logs print one per step) and of those after the last epoch."""
        self.extra: dict[str, float | bool] = {}
        self.problems = ProblemLog()
        self.records = 0
        """How many cloud-ML lines were recognised (0: not this dialect)."""
        self.saw_preamble = False
        self.saw_done = False
        self.traceback: str | None = None
        self.traceback_line: int | None = None
        self.started_without_header = False
        self.first_step_number: int | None = None
        self.announced_epochs: int | None = None
        self.last_step_form = False
        self.unclosed: list[Epoch] = []
        """Epochs that never printed ``Epoch time:`` (their indexes are settled by :meth:`finish`)."""
        self._cur: Epoch | None = None
        self._closed: Epoch | None = None
        self._pending_rt: array = array("d")
        self._pending_start: float | None = None
        self._bar_budget: int | None = None
        self._bar_done = False
        self._tb_budget = 0
        self._cmd_budget = CMD_WINDOW
        self._facts: dict[str, dict[str, int]] = {}
        self._last_form_here = False
        self._ranges: dict[range, range] = {}
        self._budget = SpillBudget()
        self._dropped_epochs = 0

    # ---- scanning --------------------------------------------------------------------------------

    def feed(self, region: bytes, newlines_before: int) -> None:
        """Read every cloud-ML line of ``region`` (whole lines, starting at a newline)."""
        lc = LineCounter(region, newlines_before)
        self._rare_once(region)
        events = self._events(region)
        if not events:
            self._bulk(region, 0, len(region), lc)
            return
        cuts = _stretches(events, len(region))
        scan = native.scan_stretches
        if scan is not None:
            # every stretch in one call (C); False: not plain, or the oldest logs' last-step form
            read = scan(region, cuts, MAX_DURATION_S, LAST_STEP_LIT if self._last_form_here else b"")
        else:
            read = [False] * (len(events) + 1)
        bulk, rare = self._bulk, self._rare
        for i, found in enumerate(read):  # the stretch before events[i]; the last one, after them all
            if found is not None:
                if isinstance(found, tuple):
                    self._add_scanned(*found)
                else:  # False
                    bulk(region, cuts[2 * i], cuts[2 * i + 1], lc)
            if i < len(events):
                m = events[i]
                g = m.lastindex
                rare("vacc" if g is None or m.re is VACC else KIND_OF[g], m, g or 1, region, lc)
        self.records += len(events)

    def _rare_once(self, region: bytes) -> None:
        """Lines looked for until found (first progress bar, traceback, command line); the last-step form."""
        if self._bar_budget is not None and not self._bar_done:
            self._first_bar(region, 0)
        if self._tb_budget:
            self._exception_line(region, 0)
        if self._cmd_budget > 0:
            self._find_command_line(region)
        self._last_form_here = native.has(region, LAST_STEP_LIT)
        self.last_step_form |= self._last_form_here

    @staticmethod
    def _events(region: bytes) -> list[re.Match[bytes]]:
        """The region's rare lines and validation accuracies, in order."""
        rare_lines = native.rare_lines
        if rare_lines is not None:  # the same matches: RARE matches only at a newline, within its line
            match = RARE.match
            events = [m for at in rare_lines(region, RARE_STARTS) if (m := match(region, at)) is not None]
        else:
            events = list(RARE.finditer(region))
        if VACC_LIT in region:
            events.extend(native.finditer_at(VACC, region, VACC_LIT))
            events.sort(key=re.Match.start)
        return events

    def _bulk(self, region: bytes, start: int, end: int, lc: LineCounter) -> None:
        """Steps and ``Real time`` stamps between two rare lines all belong to the same epoch.

        Read by :func:`native.scan_stretch` (C) when it is built and every step line and stamp of the
        stretch is whole and plain; otherwise by ``findall`` (each a plain scan in C) when every step
        literal sits in a whole step line and every value is plain; otherwise line by line, where a
        line that lacks its number or value, or a value that is absurd, is reported and dropped. The
        three give the same result for the same lines, so how a log is cut into regions never matters.
        """
        if end - start < 12:
            return
        last_form = self._last_form_here and region.find(LAST_STEP_LIT, start, end) >= 0
        scan = native.scan_stretch
        if scan is not None and not last_form:
            found = scan(region, start, end, MAX_DURATION_S)  # the same reading, in C; None: not plain
            if found is not None:
                self._add_scanned(*found)
                return
        hits = region.count(STEP_LIT, start, end)
        if last_form:
            self._steps_one_by_one(region, start, end, lc)  # the oldest logs' last-step form
        elif hits:
            lines = STEP_LINE.findall(region, start, end)
            try:
                if len(lines) != hits:
                    raise ValueError("a step line without its number or its time")
                numbers = [n for n, _ in lines]
                if max(map(len, numbers)) > STEP_NUMBER_DIGITS:
                    raise ValueError("a step number too large for 64 bits")
                times = plain_values([v for _, v in lines])
                if times is None or max(times) > MAX_DURATION_S:
                    raise ValueError("a sign, nan, inf or an absurd step time: check each value")
            except ValueError:
                self._steps_one_by_one(region, start, end, lc)
            else:
                self._add_steps(times, step_numbers(numbers))
        hits = region.count(REAL_LIT, start, end)
        if hits:
            stamps = REAL.findall(region, start, end)
            values_rt = plain_values(stamps) if len(stamps) == hits else None
            if values_rt is None or max(values_rt) == float("inf"):
                self._stamps_one_by_one(region, start, end, lc)
            else:
                self._add_stamps(values_rt)

    def _add_scanned(self, times: bytes, numbers: bytes | None, first: int, stamps: bytes) -> None:
        """What :func:`native.scan_stretch` found: 8-byte step times, numbers (None: consecutive), stamps."""
        if times:
            steps = array("l", numbers) if numbers else range(first, first + (len(times) >> 3))
            self._add_steps(times, steps)
        if stamps:
            self._add_stamps(stamps)

    def _add_steps(self, times: array | bytes, numbers: range | array) -> None:
        """Checked step times of one stretch (an ``array('d')`` or its bytes), with their logged numbers,
        into the current epoch."""
        ep = self._cur if self._cur is not None else self._open_implicit()
        if self.first_step_number is None:
            self.first_step_number = numbers[0]
        self.records += extend_doubles(ep.step_s, times)
        add_step_numbers(ep, numbers)

    def _add_stamps(self, stamps: array | bytes) -> None:
        """Checked wall-clock stamps (an ``array('d')`` or its bytes): the current epoch's, or the next
        epoch's when none is open."""
        into = self._cur.real_time if self._cur is not None else self._pending_rt
        assert isinstance(into, array)  # the reader's epochs hold their stamps in arrays
        self.records += extend_doubles(into, stamps)

    def _steps_one_by_one(self, region: bytes, start: int, end: int, lc: LineCounter) -> None:
        """The slow path: each step line checked, with its line number; bad lines are reported."""
        for line_start in lines_with(STEP_ANY, region, start, end):
            m = STEP.match(region, line_start, end)
            if m is None:
                what = f"a step line without its number or its time ({_excerpt(region, line_start, end)})"
                self._bad_line(what, region, line_start, end, lc)
                continue
            self.records += 1
            number = small_int(m.group(1))
            if number is None:
                msg = f"step number {m.group(1)[:30].decode()}... has more than {STEP_NUMBER_DIGITS} digits"
                self._problem("absurd-value", msg + "; the step is ignored", lc.at(line_start))
                continue
            self._step(number, float(m.group(2)), lc, line_start)

    def _stamps_one_by_one(self, region: bytes, start: int, end: int, lc: LineCounter) -> None:
        """The slow path for stamps: each ``Real time`` checked, with its line number."""
        pos = start
        while (hit := region.find(REAL_LIT, pos, end)) >= 0:
            m = REAL.match(region, hit, end)
            if m is None:
                line_start = region.rfind(b"\n", start, hit)
                line_start = max(line_start, start)
                what = f"a 'Real time:' without a plain number ({_excerpt(region, line_start, end)})"
                self._bad_line(what, region, line_start, end, lc)
                pos = hit + len(REAL_LIT)
                continue
            self.records += 1
            self._real(float(m.group(1)), lc, hit)
            pos = m.end()

    def _bad_line(self, what: str, region: bytes, line_start: int, end: int, lc: LineCounter) -> None:
        cut = region.find(b"\n", line_start + 1, end) < 0 and end == len(region)
        why = (
            ": the log ends inside it (no line end after its value); ignored"
            if cut
            else "; the line is ignored"
        )
        self._problem("bad-line", what + why, lc.at(line_start))

    def _step(self, number: int, value: float, lc: LineCounter, pos: int) -> None:
        if (why := step_number_problem(number)) is not None:
            self._problem("absurd-value", f"step number {number} {why}; the step is ignored", lc.at(pos))
            return
        why = duration_problem(value)
        if why is not None:
            msg = f"step {number} time {value!r} {why}; the step is ignored"
            self._problem("absurd-value", msg, lc.at(pos))
            return
        ep = self._cur if self._cur is not None else self._open_implicit()
        if self.first_step_number is None:
            self.first_step_number = number
        ep.step_s.append(value)
        add_step_numbers(ep, range(number, number + 1))

    def _real(self, value: float, lc: LineCounter, pos: int) -> None:
        why = timestamp_problem(value)
        if why is not None:
            self._problem("absurd-value", f"Real time {value!r} {why}; ignored", lc.at(pos))
            return
        if self._cur is not None:
            self._cur.real_time.append(value)
        else:
            self._pending_rt.append(value)

    def _rare(self, kind: str, m: re.Match[bytes], g: int, region: bytes, lc: LineCounter) -> None:
        """A rare line of ``kind`` (:data:`KIND_OF`), its value in group ``g``, read by its handler."""
        _RARE[kind](self, m, g, region, lc)

    # ---- one handler a kind of rare line (:data:`_RARE`) -----------------------------------------

    def _on_epoch_header(self, m: re.Match[bytes], g: int, region: bytes, lc: LineCounter) -> None:
        self._epoch_header(int(m.group(g - 1)), int(m.group(g)))
        if not self._bar_done and self._bar_budget is None:
            self._bar_budget = BAR_WINDOW
            self._first_bar(region, m.end())

    def _on_epoch_time(self, m: re.Match[bytes], g: int, region: bytes, lc: LineCounter) -> None:
        v = self._duration("Epoch time", m.group(g), lc, m.start())
        ep = self._cur if self._cur is not None else self._open_implicit()
        if v is not None:
            ep.epoch_s = v
        self._closed = ep
        self._cur = None

    def _on_validation_time(self, m: re.Match[bytes], g: int, region: bytes, lc: LineCounter) -> None:
        v = self._duration("Validation time", m.group(g), lc, m.start())
        last = self._cur if self._cur is not None else self._closed
        if v is not None and last is not None:
            last.validation_s = v

    def _on_val_accuracy(self, m: re.Match[bytes], g: int, region: bytes, lc: LineCounter) -> None:
        v = float(m.group(g))
        if v != v:
            self._problem("absurd-value", "val_accuracy is not a number; ignored", lc.at(m.start()))
            return
        if self._cur is not None and self._cur.steps:
            self._cur.validation_accuracy = v
            self.extra.setdefault(ACCURACY_AFTER_EPOCH_TIME, False)
        elif self._closed is not None:
            self._closed.validation_accuracy = v
            self.extra[ACCURACY_AFTER_EPOCH_TIME] = True

    def _on_epoch_begin(self, m: re.Match[bytes], g: int, region: bytes, lc: LineCounter) -> None:
        t = float(m.group(g))
        if self._cur is not None and not self._cur.steps:
            self._cur.start_time = t
        else:
            self._pending_start = t

    def _on_epoch_end(self, m: re.Match[bytes], g: int, region: bytes, lc: LineCounter) -> None:
        if self._cur is not None:
            self._cur.end_time = float(m.group(g))

    def _on_run_time(self, m: re.Match[bytes], g: int, region: bytes, lc: LineCounter) -> None:
        label, attr = RUN_TIMES[KIND_OF[g]]  # init, fit, save or total: the kind of its group
        v = self._duration(label, m.group(g), lc, m.start())
        if v is not None:
            setattr(self, attr, v)

    def _on_dataset(self, m: re.Match[bytes], g: int, region: bytes, lc: LineCounter) -> None:
        self._fact("dataset", "train_samples", int(m.group(g)))

    def _on_banner(self, m: re.Match[bytes], g: int, region: bytes, lc: LineCounter) -> None:
        self._banner(m.group(g - 1).decode(), int(m.group(g)))

    def _on_traceback(self, m: re.Match[bytes], g: int, region: bytes, lc: LineCounter) -> None:
        self._traceback(region, m.end(), lc.at(m.start()))

    def _on_done(self, m: re.Match[bytes], g: int, region: bytes, lc: LineCounter) -> None:
        self.saw_done = True

    def _on_test(self, m: re.Match[bytes], g: int, region: bytes, lc: LineCounter) -> None:
        self.extra["test_" + m.group(g - 1).decode()] = float(m.group(g))

    def _on_preamble(self, m: re.Match[bytes], g: int, region: bytes, lc: LineCounter) -> None:
        self.saw_preamble = True

    def _find_command_line(self, region: bytes) -> None:
        m = CMD.search(region, 0, self._cmd_budget)
        self._cmd_budget -= len(region)
        if m is not None:
            self._cmd_budget = 0
            self.records += 1
            self._command_line(m.group(1).decode("utf-8", "replace").strip())

    # ---- state changes -----------------------------------------------------------------------

    def _epoch_header(self, index: int, of: int) -> None:
        if self.announced_epochs is None:
            self.announced_epochs = of
        self._fact("epochhdr", "epochs", of)
        if not self.epochs:
            if index > 1:
                self.started_without_header = True
        elif self._cur is not None:
            # The previous epoch never printed ``Epoch time:``.
            if self._cur is self.epochs[-1]:
                self.unclosed.append(self._cur)
            self._closed = self._cur
        if self.epochs and self.epochs[-1].index is None:  # type: ignore[comparison-overlap]
            self.epochs[-1].index = index - 1
        self._start_epoch(index)

    def _open_implicit(self) -> Epoch:
        """Steps (or an epoch time) with no ``Epoch N/M`` before them: the log starts mid-epoch."""
        if not self.epochs:
            self.started_without_header = True
            index = None
        else:
            index = self.epochs[-1].index + 1 if self.epochs[-1].index is not None else None
        return self._start_epoch(index)

    def _start_epoch(self, index: int | None) -> Epoch:
        """Open epoch ``index`` with the stamps seen before it; the previous epoch's arrays are compacted."""
        ep = Epoch(index=index, real_time=self._pending_rt, start_time=self._pending_start)  # type: ignore[arg-type]
        self._pending_rt = array("d")
        self._pending_start = None
        if len(self.epochs) >= MAX_EPOCHS:
            # Not a real run (a crafted or broken log): this epoch is read but not kept, so memory stays
            # bounded; the run has its first MAX_EPOCHS epochs (reported by finish()).
            self._dropped_epochs += 1
            self._cur = ep
            return ep
        if self.epochs:
            compact(self.epochs[-1], self._ranges, self._budget)
        self.epochs.append(ep)
        self._cur = ep
        return ep

    def _first_bar(self, region: bytes, pos: int) -> None:
        """Look for the first progress bar within :data:`BAR_WINDOW` bytes after the first epoch header."""
        budget = self._bar_budget or 0
        m = FIRST_BAR.search(region, pos, pos + budget)
        self._bar_budget = budget - (len(region) - pos)
        if m is None:
            if self._bar_budget <= 0:
                self._bar_done = True
            return
        self._bar_done = True
        self._fact("bar", "batch_size", int(m.group(1)))
        self._fact("bar", "train_samples", int(m.group(2)))

    def _banner(self, label: str, value: int) -> None:
        field = BANNER_FIELDS[label]
        self._fact("banner", field, value)

    def _command_line(self, text: str) -> None:
        if self.header.command_line is None:
            self.header.command_line = text
        for opt, val in CMD_OPT.findall(text):
            field = "batch_size" if opt.startswith("batch") else "epochs" if opt == "epochs" else "gpus"
            self._fact("cmd", field, int(val))

    def _fact(self, source: str, field: str, value: int) -> None:
        """What one kind of line says about the run; the first statement of each source counts."""
        self._facts.setdefault(source, {}).setdefault(field, value)

    def _resolve_header(self) -> None:
        """Command line > banner > dataset lines > epoch headers > first progress bar, in any order."""
        f = self._facts
        h = self.header

        def first(field: str, *sources: str) -> int | None:
            return next((f[s][field] for s in sources if field in f.get(s, {})), None)

        h.train_samples = first("train_samples", "dataset", "banner", "bar")
        h.gpus = first("gpus", "cmd", "banner")
        h.epochs = first("epochs", "cmd", "banner", "epochhdr")
        h.batch_size = first("batch_size", "cmd", "banner")
        bar = f.get("bar", {})
        if h.batch_size is None and "batch_size" in bar and h.train_samples in (None, bar["train_samples"]):
            h.batch_size = bar["batch_size"]

    def _traceback(self, region: bytes, pos: int, line: int) -> None:
        if self.traceback_line is None:
            self.traceback_line = line
        self.traceback = "Traceback (most recent call last)"
        self._tb_budget = TB_WINDOW
        self._exception_line(region, pos)

    def _exception_line(self, region: bytes, pos: int) -> None:
        """The exception line closes a traceback; look for it within :data:`TB_WINDOW` bytes."""
        m = EXC_LINE.search(region, pos, pos + self._tb_budget)
        if m is not None:
            self.traceback = m.group(1).decode("utf-8", "replace").strip()[:500]
            self._tb_budget = 0
        else:
            self._tb_budget = max(0, self._tb_budget - (len(region) - pos))

    def _duration(self, what: str, raw: bytes, lc: LineCounter, pos: int) -> float | None:
        v = float(raw)
        if 0.0 < v <= MAX_DURATION_S:
            return v  # the usual case: duration_problem finds nothing wrong with it
        why = duration_problem(v)
        if why is not None:
            self._problem("absurd-value", f"{what} {v!r} {why}; ignored", lc.at(pos))
            return None
        return v

    def _problem(self, code: str, message: str, line: int | None) -> None:
        self.problems.add(code, message, line)

    # ---- result ------------------------------------------------------------------------------

    def finish(self) -> None:
        """Close the reading: settle the header, number epochs that never got a header."""
        self._resolve_header()
        if self.epochs:
            compact(self.epochs[-1], self._ranges, self._budget)
        self.real_time = JoinedStamps([*self.epochs, self._pending_rt])
        if self._dropped_epochs:
            msg = (
                f"more than {MAX_EPOCHS} epochs: not a real run; the {self._dropped_epochs} epochs after "
                "them and their steps are ignored"
            )
            self._problem("absurd-structure", msg, None)
        if self._cur is not None and self._cur.epoch_s is None and self._cur is self.epochs[-1]:
            self.unclosed.append(self._cur)
        expected = 1
        for ep in self.epochs:
            if ep.index is None:  # type: ignore[comparison-overlap]
                ep.index = expected
            expected = ep.index + 1

    # ---- the plug-in's answers (:mod:`trainsweep.logs.dialects`) ------------------------------------

    def steps_read(self) -> int | None:
        """The steps read; None when no cloud-ML line was recognised."""
        return sum(e.steps for e in self.epochs) if self.records else None

    def to_run(self, run: RunTimings, path: Path | None) -> None:
        """Write what was read into ``run``: header, epochs, run times, stamps, a traceback's failure."""
        run.dialect = DIALECT
        run.header = self.header
        run.epochs = self.epochs
        run.init_s, run.fit_s, run.total_s = self.init_s, self.fit_s, self.total_s
        run.model_save_s = self.model_save_s
        run.real_time = self.real_time
        run.extra.update(self.extra)
        if self.last_step_form:
            run.extra["last_step_form"] = "N steps training"
        if self.traceback is not None:
            run.status = "failed"
            run.failure_reason = self.traceback
            run.add_problem("failed", f"the job failed: {self.traceback}", self.traceback_line, "error")

    def check(self, run: RunTimings) -> bool:
        """The quality checks of the run's shape (:func:`checks.cloudml_shape`); True: it is partial."""
        return checks.cloudml_shape(run, self)


def _stretches(events: list[re.Match[bytes]], end: int) -> list[int]:
    """Cuts around the events: before each (a rare line's stretch keeps its newline), after the last."""
    cuts = [0]
    for m in events:
        cuts += (m.start() + 1 if m.re is RARE else m.start(), m.end())
    cuts.append(end)
    return cuts


_RARE: dict[str, Callable[[CloudMLReader, re.Match[bytes], int, bytes, LineCounter], None]] = {
    "ehdr": CloudMLReader._on_epoch_header,
    "etime": CloudMLReader._on_epoch_time,
    "vtime": CloudMLReader._on_validation_time,
    "vacc": CloudMLReader._on_val_accuracy,
    "ebeg": CloudMLReader._on_epoch_begin,
    "eend": CloudMLReader._on_epoch_end,
    **dict.fromkeys(RUN_TIMES, CloudMLReader._on_run_time),
    "trainon": CloudMLReader._on_dataset,
    "xshape": CloudMLReader._on_dataset,
    "banner": CloudMLReader._on_banner,
    "tb": CloudMLReader._on_traceback,
    "done": CloudMLReader._on_done,
    "test": CloudMLReader._on_test,
    "pre": CloudMLReader._on_preamble,
}
"""What each kind of rare line (:data:`KIND_OF`, and ``vacc``) does to the reader."""


_EXCERPT_BYTES = 80


def _excerpt(region: bytes, line_start: int, end: int) -> str:
    """The line at ``line_start`` (its newline) as a problem shows it: its first bytes, undecodable ones
    escaped (``\\xff``), so the report says exactly which line was dropped."""
    begin = line_start + 1 if region[line_start : line_start + 1] == b"\n" else line_start
    stop = region.find(b"\n", begin, end)
    line = region[begin : stop if stop >= 0 else end]
    text = line[:_EXCERPT_BYTES].decode("utf-8", "backslashreplace")
    return "'" + text + ("..." if len(line) > _EXCERPT_BYTES else "") + "'"
