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

from trainsweep.logs.lines import Alternation, LineCounter
from trainsweep.logs.model import Epoch, RunHeader
from trainsweep.logs.numbers import NUM, duration_problem, timestamp_problem

DIALECT = "cloud-ml"

_S = rb"s?"
ALT = Alternation(
    rb"\n",
    [
        ("step", rb"(\d+) step training time: " + NUM),
        ("real", rb"Real time: " + NUM),
        ("last", rb"(\d+) steps training: " + NUM),
        ("ehdr", rb"Epoch (\d+)/(\d+)"),
        ("etime", rb"Epoch time: " + NUM),
        ("vtime", rb"Validation time: " + NUM),
        ("vacc", rb"[\x08\r ]*\d+/\d+ \[=+\][^\n]*? - val_acc(?:uracy)?: " + NUM),
        ("ebeg", rb"on_epoch_begin: " + NUM),
        ("eend", rb"on_epoch_end: " + NUM),
        (
            "init",
            rb"(?:\('Tempo de [Ii]nicializacao: ', |Tempo de [Ii]nicializacao:? |Initialization [Tt]ime:? )"
            + NUM,
        ),
        ("fit", rb"Tempo do fit: " + NUM),
        ("save", rb"Tempo levado para o modelo ser salvo: " + NUM),
        ("total", rb"Duracao do treinamento: *" + NUM),
        ("trainon", rb"Train on (\d+) samples"),
        ("xshape", rb"(?:x_train shape|Conjunto de treinamento): \((\d+),"),
        ("nsamples", rb"(\d+) train samples"),
        ("banner", rb" *- (Total|Tamanho do batch|GPUs solicitadas|Numero de epocas): (\d+)"),
        ("cmd", rb"((?:[^\s/]*/)*python[0-9.]*[ \t][^\n]*?\.py\b[^\n]*)"),
        ("tb", rb"Traceback \(most recent call last\)"),
        ("done", rb"Training complete"),
        ("test", rb"Test (loss|accuracy): " + NUM),
        ("pre", rb"(?:Downloading data from|Using TensorFlow backend|Dados carregados de|Training \.\.\.)"),
    ],
)

# The first Keras progress bar of the first epoch: ``  256/60000 [....`` -> batch size 256 of 60000.
_FIRST_BAR = re.compile(rb"\n[\x08\r ]*(\d+)/(\d+) \[[=>.]")
_BAR_WINDOW = 1 << 16
_TB_WINDOW = 1 << 16
_EXC_LINE = re.compile(rb"\n([A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit)\b[^\n]*)")
_RUN_TIMES = {
    "init": ("init time", "init_s"),
    "fit": ("fit time", "fit_s"),
    "save": ("model save time", "model_save_s"),
    "total": ("total time", "total_s"),
}
_CMD_OPT = re.compile(r"--(batch[-_]size|num[-_]gpus|gpus|epochs)[= ](\d+)")


class CloudMLReader:
    """Reads the cloud-ML lines of a log, region by region, into epochs and run-level values."""

    def __init__(self) -> None:
        self.epochs: list[Epoch] = []
        self.header = RunHeader()
        self.init_s: float | None = None
        self.fit_s: float | None = None
        self.total_s: float | None = None
        self.model_save_s: float | None = None
        self.real_time: list[float] = []
        self.extra: dict[str, float] = {}
        self.problems: list[tuple[str, str, int | None, str]] = []
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
        self.unclosed: list[int] = []
        self._cur: Epoch | None = None
        self._closed: Epoch | None = None
        self._pending_rt: list[float] = []
        self._pending_start: float | None = None
        self._bar_budget: int | None = None
        self._bar_done = False
        self._tb_budget = 0

    # ---- scanning --------------------------------------------------------------------------------

    def feed(self, region: bytes, newlines_before: int) -> None:
        """Read every cloud-ML line of ``region`` (whole lines, starting at a newline)."""
        lc = LineCounter(region, newlines_before)
        if self._bar_budget is not None and not self._bar_done:
            self._first_bar(region, 0)
        if self._tb_budget:
            self._exception_line(region, 0)
        kind_of = ALT.kind_of
        fg = ALT.first_group
        g_step = fg["step"]
        g_real = fg["real"]
        n = 0
        for m in ALT.regex.finditer(region):
            n += 1
            kind = kind_of[m.lastindex]  # type: ignore[index]
            if kind == "step":
                self._step(int(m.group(g_step)), float(m.group(g_step + 1)), lc, m.start())
            elif kind == "real":
                self._real(float(m.group(g_real)), lc, m.start())
            else:
                self._rare(kind, m, fg[kind], region, lc)
        self.records += n

    def _step(self, number: int, value: float, lc: LineCounter, pos: int) -> None:
        why = duration_problem(value)
        if why is not None:
            msg = f"step {number} time {value!r} {why}; the step is ignored"
            self._problem("absurd-value", msg, lc.at(pos))
            return
        ep = self._cur
        if ep is None:
            ep = self._open_implicit(number)
        if self.first_step_number is None:
            self.first_step_number = number
        ep.step_s.append(value)
        ep.step_numbers.append(number)

    def _real(self, value: float, lc: LineCounter, pos: int) -> None:
        why = timestamp_problem(value)
        if why is not None:
            self._problem("absurd-value", f"Real time {value!r} {why}; ignored", lc.at(pos))
            return
        self.real_time.append(value)
        if self._cur is not None:
            self._cur.real_time.append(value)
        else:
            self._pending_rt.append(value)

    def _rare(self, kind: str, m: re.Match[bytes], g: int, region: bytes, lc: LineCounter) -> None:
        if kind == "last":
            self.last_step_form = True
            self._step(int(m.group(g)), float(m.group(g + 1)), lc, m.start())
        elif kind == "ehdr":
            self._epoch_header(int(m.group(g)), int(m.group(g + 1)), lc.at(m.start()))
            if not self._bar_done and self._bar_budget is None:
                self._bar_budget = _BAR_WINDOW
                self._first_bar(region, m.end())
        elif kind == "etime":
            v = self._duration("Epoch time", m.group(g), lc, m.start())
            ep = self._cur
            if ep is None:
                ep = self._open_implicit(None)
            if v is not None:
                ep.epoch_s = v
            self._closed = ep
            self._cur = None
        elif kind == "vtime":
            v = self._duration("Validation time", m.group(g), lc, m.start())
            ep = self._cur if self._cur is not None else self._closed
            if v is not None and ep is not None:
                ep.validation_s = v
        elif kind == "vacc":
            v = float(m.group(g))
            if v != v:
                self._problem("absurd-value", "val_accuracy is not a number; ignored", lc.at(m.start()))
                return
            if self._cur is not None and self._cur.steps:
                self._cur.validation_accuracy = v
            elif self._closed is not None:
                self._closed.validation_accuracy = v
        elif kind == "ebeg":
            t = float(m.group(g))
            if self._cur is not None and not self._cur.steps:
                self._cur.start_time = t
            else:
                self._pending_start = t
        elif kind == "eend":
            if self._cur is not None:
                self._cur.end_time = float(m.group(g))
        elif kind in ("init", "fit", "save", "total"):
            label, attr = _RUN_TIMES[kind]
            v = self._duration(label, m.group(g), lc, m.start())
            if v is not None:
                setattr(self, attr, v)
        elif kind in ("trainon", "xshape", "nsamples"):
            if self.header.train_samples is None:
                self.header.train_samples = int(m.group(g))
        elif kind == "banner":
            self._banner(m.group(g).decode(), int(m.group(g + 1)))
        elif kind == "cmd":
            self._command_line(m.group(g).decode("utf-8", "replace").strip())
        elif kind == "tb":
            self._traceback(region, m.end(), lc.at(m.start()))
        elif kind == "done":
            self.saw_done = True
        elif kind == "test":
            self.extra["test_" + m.group(g).decode()] = float(m.group(g + 1))
        elif kind == "pre":
            self.saw_preamble = True

    # ---- state changes -----------------------------------------------------------------------

    def _epoch_header(self, index: int, of: int, line: int) -> None:
        if self.announced_epochs is None:
            self.announced_epochs = of
        if self.header.epochs is None:
            self.header.epochs = of
        if not self.epochs:
            if index > 1:
                self.started_without_header = True
        elif self._cur is not None:
            # The previous epoch never printed ``Epoch time:``.
            self.unclosed.append(self._cur.index)
            self._closed = self._cur
        if self.epochs and self.epochs[-1].index is None:  # type: ignore[comparison-overlap]
            self.epochs[-1].index = index - 1
        ep = Epoch(index=index)
        ep.real_time.extend(self._pending_rt)
        ep.start_time = self._pending_start
        self._pending_rt.clear()
        self._pending_start = None
        self.epochs.append(ep)
        self._cur = ep

    def _open_implicit(self, step_number: int | None) -> Epoch:
        """Steps (or an epoch time) with no ``Epoch N/M`` before them: the log starts mid-epoch."""
        if not self.epochs:
            self.started_without_header = True
            index = None
        else:
            index = self.epochs[-1].index + 1 if self.epochs[-1].index is not None else None
        ep = Epoch(index=index)  # type: ignore[arg-type]
        ep.real_time.extend(self._pending_rt)
        ep.start_time = self._pending_start
        self._pending_rt.clear()
        self._pending_start = None
        self.epochs.append(ep)
        self._cur = ep
        return ep

    def _first_bar(self, region: bytes, pos: int) -> None:
        """Look for the first progress bar within :data:`_BAR_WINDOW` bytes after the first epoch header."""
        budget = self._bar_budget or 0
        m = _FIRST_BAR.search(region, pos, pos + budget)
        self._bar_budget = budget - (len(region) - pos)
        if m is None:
            if self._bar_budget <= 0:
                self._bar_done = True
            return
        self._bar_done = True
        if self.header.batch_size is None and self.header.train_samples in (None, int(m.group(2))):
            self.header.batch_size = int(m.group(1))
            if self.header.train_samples is None:
                self.header.train_samples = int(m.group(2))

    def _banner(self, label: str, value: int) -> None:
        h = self.header
        if label == "Total" and h.train_samples is None:
            h.train_samples = value
        elif label == "Tamanho do batch":
            h.batch_size = value
        elif label == "GPUs solicitadas":
            h.gpus = value
        elif label == "Numero de epocas":
            h.epochs = value

    def _command_line(self, text: str) -> None:
        h = self.header
        if h.command_line is None:
            h.command_line = text
        for opt, val in _CMD_OPT.findall(text):
            v = int(val)
            if opt.startswith("batch"):
                h.batch_size = v
            elif opt in ("num-gpus", "num_gpus", "gpus"):
                h.gpus = v
            elif opt == "epochs":
                h.epochs = v

    def _traceback(self, region: bytes, pos: int, line: int) -> None:
        if self.traceback_line is None:
            self.traceback_line = line
        self.traceback = "Traceback (most recent call last)"
        self._tb_budget = _TB_WINDOW
        self._exception_line(region, pos)

    def _exception_line(self, region: bytes, pos: int) -> None:
        """The exception line closes a traceback; look for it within :data:`_TB_WINDOW` bytes."""
        m = _EXC_LINE.search(region, pos, pos + self._tb_budget)
        if m is not None:
            self.traceback = m.group(1).decode("utf-8", "replace").strip()[:500]
            self._tb_budget = 0
        else:
            self._tb_budget = max(0, self._tb_budget - (len(region) - pos))

    def _duration(self, what: str, raw: bytes, lc: LineCounter, pos: int) -> float | None:
        v = float(raw)
        why = duration_problem(v)
        if why is not None:
            self._problem("absurd-value", f"{what} {v!r} {why}; ignored", lc.at(pos))
            return None
        return v

    def _problem(self, code: str, message: str, line: int | None, severity: str = "warning") -> None:
        self.problems.append((code, message, line, severity))

    # ---- result ------------------------------------------------------------------------------

    def finish(self) -> None:
        """Close the reading: number epochs that never got a header, drop empty trailing state."""
        if self._cur is not None and self._cur.epoch_s is None:
            self.unclosed.append(self._cur.index)
        expected = 1
        for ep in self.epochs:
            if ep.index is None:  # type: ignore[comparison-overlap]
                ep.index = expected
            expected = ep.index + 1

    @property
    def has_data(self) -> bool:
        return bool(self.epochs) or self.init_s is not None or self.total_s is not None
