"""Quality checks on a parsed run: what the name says vs what the log says, steps per epoch, a log that
starts mid-run or ends early, a failed or empty job. Each finding is a :class:`Problem`, never an error.

Problem codes (also in docs/log-formats.md): empty, binary, unknown-dialect, no-training, failed,
starts-mid-run, ends-early, epoch-not-closed, no-final-lines, steps-per-epoch, last-step-not-logged,
header-contradicts-name, unknown-instance-type, absurd-value, absurd-structure, bad-line, bad-mllog,
undecodable-bytes, long-line, read-error, missing-events; for MLPerf result logs also
mlperf-epochs-in-samples and mlperf-system;
for a spec's ``log_format`` (:mod:`trainsweep.logs.pattern`) also no-match and bad-value.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainsweep import instances, layout
from trainsweep.logs import mllog
from trainsweep.logs.limits import MAX_PROBLEMS_PER_CODE
from trainsweep.logs.model import RunTimings

if TYPE_CHECKING:
    from trainsweep.logs.cloudml import CloudMLReader
    from trainsweep.logs.dialects import DialectReader


@dataclass(frozen=True)
class NameFacts:
    """What a log's file or job name (and, for old EC2 logs and per-instance folders, its folder) says
    about the run. The instance type is read with :func:`trainsweep.instances.read_spelling`."""

    vmtype: str | None = None
    """The instance type as the name (or folder) spells it: ``p3-1``, ``g4dnxlarge-1``, ``c5x``..."""
    batch_size: int | None = None
    run: int | None = None
    gpus: int | None = None
    instance_type: str | None = None
    platform: str | None = None
    """``ec2`` when the spelling says the run was on plain EC2; None when the name does not say."""

    @property
    def unknown_spelling(self) -> bool:
        """The name spells an instance type that no row of the spelling table reads."""
        return self.vmtype is not None and self.instance_type is None

    @classmethod
    def infer(cls, file_name: str | None, path: Path | None = None) -> NameFacts:
        if not file_name:
            return cls()
        base = Path(file_name).name
        cell = layout.parse_seed_log_name(base)
        if cell is None:
            stem = base.rsplit(".", 1)[0] if base.endswith((".txt", ".out", ".log")) else base
            cell = layout.parse_job_name(stem)
        folder = path.parent.name if path is not None else ""
        vm = cell.vmtype if cell is not None else None
        bs, run = (cell.batch_size, cell.run) if cell is not None else (None, None)
        gpus = None
        if vm is not None and vm.isdigit():
            # Older EC2 form ``result-<GPUS>-<BS>-e<N>``: the instance type is the folder name.
            gpus = int(vm)
            vm = None
            spelled = instances.read_spelling(folder) if folder else None
            if spelled is not None and spelled.form == "instance-name":
                return cls(
                    instances.vmtype(spelled.instance.name), bs, run, gpus, spelled.instance.name, "ec2"
                )
            return cls(None, bs, run, gpus)
        if vm is None and folder:
            # A name that does not say (``TEST_NODE-...out``) in a per-instance folder (``c5x/``).
            spelled = instances.read_spelling(folder)
            if spelled is not None:
                vm = folder
        said = _platform_of_folders(path)
        if vm is None:
            return cls(None, bs, run, platform=said)
        spelled = instances.read_spelling(vm)
        if spelled is None:
            return cls(vm, bs, run, platform=said)
        return cls(vm, bs, run, spelled.gpus, spelled.instance.name, spelled.platform or said)


def _platform_of_folders(path: Path | None) -> str | None:
    """``ec2``/``sagemaker`` when a folder of the log is named for it, as the seeds named experiments
    (``2020-07-CIFAR-on-ec2/``, ``2020-08-CIFAR-on-sagemaker/``); None when none says."""
    for part in reversed(path.parent.parts if path is not None else ()):
        low = part.lower()
        if low.endswith("-on-ec2"):
            return "ec2"
        if low.endswith("-on-sagemaker"):
            return "sagemaker"
    return None


def check_run(
    run: RunTimings,
    naming: NameFacts,
    text: Any,
    reader: DialectReader | None,
    train_samples: int | None,
    *,
    pattern_lines: int | None = None,
) -> None:
    """Add the quality problems of ``run`` and settle its status.

    ``reader`` is the dialect the run was read in (None: none); its ``check`` adds the problems of the
    run's shape. ``pattern_lines`` is how many lines a spec's ``log_format`` matched (None: the dialect
    was sniffed).
    """
    if run.bytes_read == 0 or not text.nonblank:
        run.add_problem("empty", "the log is empty", None, "error")
        run.status = "empty"
        return
    if pattern_lines == 0:
        run.add_problem(
            "no-match",
            "the spec's log_format matched no line of the log: no step times were read "
            "(check the pattern against a line of this log)",
            None,
            "error",
        )
        run.status = "unreadable"
        run.failure_reason = "the log_format pattern matched no line of the log"
        return
    if text.binary and run.dialect == "unknown":
        run.add_problem("binary", "the log is not text (binary content)", None, "error")
        run.status = "unreadable"
        return
    if run.dialect == "unknown":
        run.add_problem(
            "unknown-dialect",
            "no line of a known log format (cloud-ML, MO833, MLLOG) was found",
            None,
            "error",
        )
        run.status = "unreadable"
        return

    _check_name(run, naming)
    if mllog.MLPERF in run.extra:
        return  # an MLPerf result log times blocks and epochs, not steps; its status is run_stop's
    partial = False
    if not run.epochs or not any(e.steps for e in run.epochs):
        if run.status != "failed":
            run.status = "failed"
            run.failure_reason = "the log ends before the first training step"
            message = f"{run.failure_reason} ({run.bytes_read} bytes): the job probably failed"
            if pattern_lines:
                run.failure_reason = message = (
                    f"the log_format matched {pattern_lines} line(s) but none gave a step time "
                    "(values that are not numbers, or a single timestamp per epoch)"
                )
            run.add_problem("no-training", message, None, "error")
        return
    if reader is not None:
        partial |= reader.check(run)
    _check_steps_per_epoch(run, train_samples)
    if partial and run.status == "complete":
        run.status = "partial"


def _check_name(run: RunTimings, naming: NameFacts) -> None:
    h = run.header
    if naming.unknown_spelling:
        run.add_problem(
            "unknown-instance-type",
            f"the name spells the instance type {naming.vmtype!r}, which no row of the spelling table "
            "reads (docs/log-formats.md): the run has no instance type, GPU count or price",
        )
    if naming.batch_size is not None and h.batch_size is not None and h.batch_size != naming.batch_size:
        run.add_problem(
            "header-contradicts-name",
            f"the name says batch size {naming.batch_size}, the log says {h.batch_size}",
        )
    if naming.gpus is not None and h.gpus is not None and h.gpus != naming.gpus:
        run.add_problem(
            "header-contradicts-name", f"the name says {naming.gpus} GPU(s), the log says {h.gpus}"
        )
    if naming.instance_type is not None and h.instance_type is not None:
        said = h.instance_type if h.instance_type.startswith("ml.") else "ml." + h.instance_type
        if said != naming.instance_type:
            run.add_problem(
                "header-contradicts-name",
                f"the name says instance type {naming.instance_type}, the log says {h.instance_type}",
            )


def cloudml_shape(run: RunTimings, r: CloudMLReader) -> bool:
    """A cloud-ML run that starts mid-run, has epochs without an end or ends early; True: partial."""
    partial = False
    first = run.epochs[0]
    if r.started_without_header or (r.first_step_number or 1) > 1 or first.index > 1:
        step = first.step_numbers[0] if first.steps else None
        run.add_problem(
            "starts-mid-run",
            f"the log begins in the middle of the run (first step seen: epoch {first.index}, step {step}); "
            "the earlier part is missing (e.g. a CloudWatch export without pagination)",
        )
        partial = True
    unclosed = r.unclosed[:-1] if r.unclosed and r.unclosed[-1] is run.epochs[-1] else r.unclosed
    for ep in unclosed[:MAX_PROBLEMS_PER_CODE]:
        run.add_problem("epoch-not-closed", f"epoch {ep.index} has no 'Epoch time:' line")
    if len(unclosed) > MAX_PROBLEMS_PER_CODE:
        more = len(unclosed) - MAX_PROBLEMS_PER_CODE
        run.add_problem("epoch-not-closed", f"{more} more epochs have no 'Epoch time:' line")
    last = run.epochs[-1]
    if last.epoch_s is None:
        run.add_problem(
            "ends-early",
            f"the log ends inside epoch {last.index} (no 'Epoch time:' line after its {last.steps} steps)",
        )
        partial = True
    elif r.announced_epochs is not None and last.index < r.announced_epochs:
        run.add_problem(
            "ends-early", f"the log announces {r.announced_epochs} epochs but ends after epoch {last.index}"
        )
        partial = True
    elif run.fit_s is None and run.total_s is None and not r.saw_done and run.status != "failed":
        run.add_problem("no-final-lines", "the log has no final timing lines (fit / total training time)")
    return partial


def structured_shape(run: RunTimings, seen: Collection[str] = ()) -> bool:
    """An MLLOG run that ends before the epochs its header announces, or lacks an event a complete run
    holds (:func:`missing_events`; ``seen``: the keys read); True: partial."""
    if run.dialect != "mllog":
        return False
    if run.prediction is None and _ends_before_announced(run):
        return True
    return missing_events(run, seen)


def _ends_before_announced(run: RunTimings) -> bool:
    last = run.epochs[-1]
    reached = run.extra.get(mllog.TARGET_REACHED)
    if isinstance(reached, dict) and reached.get("epoch") == last.index:
        return False  # it stopped at the target: the run is complete
    if run.header.epochs is not None and last.index < run.header.epochs:
        run.add_problem(
            "ends-early", f"the log announces {run.header.epochs} epochs but ends after epoch {last.index}"
        )
        return True
    return False


def missing_events(run: RunTimings, seen: Collection[str]) -> bool:
    """A run trainsweep's timeline writer started (``run_start`` and ``trainsweep.step`` events) that did not
    fail but lacks an event of :func:`mllog.required_events`: it ended before its end was written; True:
    partial. A log without both is another tool's, or a fragment: not checked."""
    if mllog.STEP not in seen or mllog.RUN_START not in seen or run.status == "failed":
        return False
    missing = [k for k in mllog.required_events(early_stopped=run.prediction is not None) if k not in seen]
    if not missing:
        return False
    run.add_problem(
        "missing-events",
        f"the log lacks {', '.join(missing)}, which every complete run holds: "
        "the process ended before it wrote the run's end",
    )
    return True


def _check_steps_per_epoch(run: RunTimings, train_samples: int | None) -> None:
    n = train_samples if train_samples is not None else run.header.train_samples
    bs = run.header.batch_size if run.header.batch_size is not None else run.batch_size
    if not n or not bs or n <= 0 or bs <= 0:
        return
    expected = math.ceil(n / bs)
    short_by_last: list[int] = []
    wrong: list[Any] = []  # epochs; only the first ten are named in the message
    checked = _whole_epochs(run)
    for ep in checked:
        if ep.steps == expected:
            continue
        if ep.steps == expected - 1 and ep.steps and ep.step_numbers[-1] == expected - 1:
            short_by_last.append(ep.index)
        else:
            wrong.append(ep)
    if short_by_last:
        every = len(short_by_last) == len(checked)
        which = "every epoch" if every else "epoch(s) " + ", ".join(map(str, short_by_last[:10]))
        which += f" (and {len(short_by_last) - 10} more)" if not every and len(short_by_last) > 10 else ""
        run.add_problem(
            "last-step-not-logged",
            f"{which} logs {expected - 1} of ceil({n}/{bs}) = {expected} steps: the last step of the epoch "
            "is not printed (a known trait of the EC2 .out logs); the epoch time includes it",
        )
    if wrong:
        run.add_problem(
            "steps-per-epoch",
            f"steps per epoch differ from ceil({n}/{bs}) = {expected}: "
            + "; ".join(f"epoch {ep.index}: {ep.steps}" for ep in wrong[:10])
            + (f" (and {len(wrong) - 10} more)" if len(wrong) > 10 else ""),
        )


def _whole_epochs(run: RunTimings) -> list[Any]:
    """Epochs that should hold all their steps: not a partial first epoch, not an unfinished last one."""
    eps = list(run.epochs)
    codes = {p.code for p in run.problems}
    if "starts-mid-run" in codes and eps:
        eps = eps[1:]
    if eps and eps[-1].epoch_s is None and run.dialect == "cloud-ml":
        eps = eps[:-1]
    return eps
