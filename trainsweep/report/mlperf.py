"""MLPerf result logs compared per benchmark: systems by time to train, and by cost where a system is a
SageMaker instance type with a price.

``trainsweep import`` of a submission folder (``<submitter>/results/<system>/<benchmark>/result_*.txt``) and
``trainsweep report`` of its output write, per benchmark, ``mlperf/<benchmark>/systems.csv`` and
``mlperf/<benchmark>/report.html`` (:func:`mlperf_artefacts`); a run instrumented with the seed McGill
tooling's per-step keys also gets ``mlperf/<benchmark>/timeline-<system>-<run>.png`` and its system the
median per-step compute and data wait. A run is one MLPerf result log read by
:class:`trainsweep.logs.mlperf.MlperfRun` (``run.extra["trainsweep.mlperf"]``).

A system's time to train is the median of its successful runs' ``run_stop - run_start`` (MLPerf's official
score averages a set number of runs after dropping the fastest and slowest; a folder may hold fewer runs,
so the median of those found is shown with their range). A system that is not a SageMaker instance type
(Oracle's ``BM.GPU.H100.8``, on-premises machines) has no price: the report says so, it does not guess one.
"""

from __future__ import annotations

import base64
import html
import math
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from trainsweep import __version__
from trainsweep.logs import mllog
from trainsweep.logs.model import RunTimings
from trainsweep.report import _safe as safe_name
from trainsweep.report import csv_bytes
from trainsweep.report.html import _CSS, _JS, _dur

MLPERF_DIR = "mlperf"
SYSTEMS_CSV = "systems.csv"
REPORT_HTML = "report.html"

CSV_COLUMNS = (
    "benchmark",
    "submitter",
    "system",
    "nodes",
    "accelerators_per_node",
    "accelerators",
    "accelerator",
    "global_batch_size",
    "runs",
    "successful_runs",
    "time_to_train_s",
    "time_to_train_min_s",
    "time_to_train_max_s",
    "samples_per_s",
    "step_s",
    "step_compute_s",
    "step_data_wait_s",
    "instance_type",
    "usd_per_hour",
    "cost_to_train_usd",
    "price_note",
)


@dataclass
class SystemRow:
    """One system's runs of one benchmark."""

    benchmark: str
    system: str
    submitter: str | None = None
    nodes: int | None = None
    accelerators_per_node: int | None = None
    accelerators: int | None = None
    accelerator: str | None = None
    batch_sizes: set[int] = field(default_factory=set)
    runs: list[RunTimings] = field(default_factory=list)
    times_s: list[float] = field(default_factory=list)
    """Time to train of each successful run."""
    samples_per_s: list[float] = field(default_factory=list)
    steps: dict[str, list[float]] = field(default_factory=lambda: {"step": [], "compute": [], "wait": []})
    """Per-step durations of the instrumented runs (McGill keys), rank 0, all runs of the system."""
    instance_type: str | None = None
    usd_per_hour: float | None = None
    price_note: str = ""

    @property
    def time_to_train_s(self) -> float | None:
        return _median(self.times_s)

    @property
    def cost_to_train_usd(self) -> float | None:
        t = self.time_to_train_s
        if t is None or self.usd_per_hour is None:
            return None
        return t / 3600.0 * self.usd_per_hour * (self.nodes or 1)

    def to_dict(self) -> dict[str, Any]:
        return {
            "benchmark": self.benchmark,
            "submitter": self.submitter,
            "system": self.system,
            "nodes": self.nodes,
            "accelerators_per_node": self.accelerators_per_node,
            "accelerators": self.accelerators,
            "accelerator": self.accelerator,
            "global_batch_size": " ".join(str(b) for b in sorted(self.batch_sizes)),
            "runs": len(self.runs),
            "successful_runs": len(self.times_s),
            "time_to_train_s": self.time_to_train_s,
            "time_to_train_min_s": min(self.times_s) if self.times_s else None,
            "time_to_train_max_s": max(self.times_s) if self.times_s else None,
            "samples_per_s": _median(self.samples_per_s),
            "step_s": _median(self.steps["step"]),
            "step_compute_s": _median(self.steps["compute"]),
            "step_data_wait_s": _median(self.steps["wait"]),
            "instance_type": self.instance_type,
            "usd_per_hour": self.usd_per_hour,
            "cost_to_train_usd": self.cost_to_train_usd,
            "price_note": self.price_note,
        }


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _add_steps(row: SystemRow, run: RunTimings) -> None:
    for e in run.epochs:
        row.steps["step"].extend(e.step_s)
        for name, values in (("compute", e.compute_s), ("wait", e.data_wait_s)):
            if values is not None:
                row.steps[name].extend(v for v in values if math.isfinite(v))


def _said(v: Any) -> str | None:
    """A name as the log or system description gives it; the templates' placeholders say nothing."""
    return str(v) if v not in (None, "") and "PLACEHOLDER" not in str(v) else None


def benchmark_rows(runs: list[RunTimings], region: str = "us-east-1") -> dict[str, list[SystemRow]]:
    """Per benchmark, its systems, fastest (median time to train) first; systems without one last."""
    from trainsweep.cost.prices import hourly_usd

    rows: dict[tuple[str, str], SystemRow] = {}
    for run in runs:
        m = run.extra.get(mllog.MLPERF)
        if not isinstance(m, dict):
            continue
        system = m.get("system") or {}
        said = (system.get("system_name"), m.get("system_folder"), m.get("platform"))
        name = next((n for n in map(_said, said) if n), "unknown system")
        key = (str(m.get("benchmark")), name)
        row = rows.get(key)
        if row is None:
            row = rows[key] = SystemRow(
                key[0], name, _said(system.get("submitter")) or _said(m.get("submitter"))
            )
            row.nodes = system.get("nodes")
            row.accelerators_per_node = system.get("accelerators_per_node")
            row.accelerators = system.get("accelerators")
            row.accelerator = system.get("accelerator")
        row.runs.append(run)
        _add_steps(row, run)
        if run.batch_size is not None:
            row.batch_sizes.add(run.batch_size)
        if m.get("status") == "success" and m.get("time_to_train_s") is not None:
            row.times_s.append(float(m["time_to_train_s"]))
            if m.get("samples_per_s") is not None:
                row.samples_per_s.append(float(m["samples_per_s"]))
        if row.instance_type is None and run.header.instance_type:
            row.instance_type = run.header.instance_type
    out: dict[str, list[SystemRow]] = defaultdict(list)
    for row in rows.values():
        _price(row, region, hourly_usd)
        out[row.benchmark].append(row)
    for systems in out.values():
        systems.sort(key=lambda r: (r.time_to_train_s is None, r.time_to_train_s or 0.0, r.system))
    return dict(sorted(out.items()))


def _price(row: SystemRow, region: str, hourly_usd: Any) -> None:
    if row.instance_type is None:
        described = (r.extra[mllog.MLPERF].get("system") or {} for r in row.runs)
        status = next((d["status"] for d in described if d.get("status")), None)
        said = f" (its system description says status {status!r})" if status else ""
        row.price_note = f"{row.system} is not a SageMaker instance type{said}: no price, not guessed"
        return
    row.usd_per_hour = hourly_usd(row.instance_type, region)
    if row.usd_per_hour is None:
        row.price_note = f"no price for {row.instance_type} in {region}"
    else:
        row.price_note = (
            f"{row.instance_type} on-demand in {region} x {row.nodes or 1} node(s), for the time to train "
            "(MLPerf's time to train leaves out initialisation)"
        )


def _num(x: Any) -> str:
    if x is None:
        return ""
    if isinstance(x, float):
        return f"{x:.6g}"
    return str(x)


def systems_csv(rows: list[SystemRow]) -> bytes:
    return csv_bytes(CSV_COLUMNS, (r.to_dict() for r in rows), _num)


def _e(x: Any) -> str:
    return html.escape("" if x is None else str(x), quote=True)


def timeline_name(row: SystemRow, run: RunTimings) -> str:
    return f"timeline-{safe_name(row.system)}-{safe_name(run.name)}.png"


def timelines(rows: list[SystemRow]) -> dict[str, tuple[str, bytes]]:
    """Per instrumented run (one with per-step durations), its per-rank timeline of steps: file name ->
    (caption, PNG)."""
    from trainsweep.plots import figure_png
    from trainsweep.plots.steps import rank_timeline_figure

    out: dict[str, tuple[str, bytes]] = {}
    for row in rows:
        for run in row.runs:
            if run.steps_total:
                caption = (
                    f"{row.system}, {run.name}: per-rank timeline of steps 2-61 from the instrumented "
                    "keys (load_batch_mem = waiting for data, all_compute = compute, step_end = the step)."
                )
                out[timeline_name(row, run)] = (caption, figure_png(rank_timeline_figure(run)))
    return out


def benchmark_html(
    benchmark: str, rows: list[SystemRow], figures: dict[str, tuple[str, bytes]] | None = None
) -> bytes:
    head = (
        "<tr>"
        + "".join(
            f'<th class="t">{h}</th>' if t else f"<th>{h}</th>"
            for h, t in (
                ("Submitter", True),
                ("System", True),
                ("Nodes", False),
                ("Accelerators", False),
                ("Accelerator", True),
                ("Global batch", False),
                ("Runs (successful)", False),
                ("Time to train (median)", False),
                ("Range", False),
                ("Samples/s", False),
                ("Step: compute / data wait (ms)", False),
                ("USD to train", False),
                ("Price", True),
            )
        )
        + "</tr>"
    )
    body = []
    for i, r in enumerate(rows):
        d = r.to_dict()
        t = d["time_to_train_s"]
        rng = f"{d['time_to_train_min_s']:.1f} - {d['time_to_train_max_s']:.1f} s" if r.times_s else ""
        tag = ' <span class="tag">fastest</span>' if i == 0 and t is not None else ""
        sps, cost = d["samples_per_s"], d["cost_to_train_usd"]
        comp, wait = d["step_compute_s"], d["step_data_wait_s"]
        split = "" if comp is None and wait is None else f"{_ms(comp)} / {_ms(wait)}"
        cells = [
            f'<td class="t">{_e(r.submitter)}</td>',
            f'<td class="t">{_e(r.system)}{tag}</td>',
            f"<td>{_e(r.nodes)}</td>",
            f"<td>{_e(r.accelerators)}</td>",
            f'<td class="t">{_e(r.accelerator)}</td>',
            f"<td>{_e(d['global_batch_size'])}</td>",
            f"<td>{len(r.runs)} ({len(r.times_s)})</td>",
            f'<td data-v="{"" if t is None else t}">{_dur(t)}</td>',
            f"<td>{rng}</td>",
            f'<td data-v="{"" if sps is None else sps}">{"" if sps is None else f"{sps:,.0f}"}</td>',
            f"<td>{split}</td>",
            f'<td data-v="{"" if cost is None else cost}">{"" if cost is None else f"{cost:.2f}"}</td>',
            f'<td class="t">{_e(r.price_note)}</td>',
        ]
        body.append(("<tr class=pick>" if tag else "<tr>") + "".join(cells) + "</tr>")
    unpriced = [r.system for r in rows if r.usd_per_hour is None]
    caveat = (
        f'<p class="caveat">No cost for {_e(", ".join(unpriced))}: '
        + ("none of these systems is" if len(unpriced) == len(rows) else "these systems are not")
        + " a SageMaker instance type with a known price; they are compared by time to train only.</p>"
        if unpriced
        else ""
    )
    page = f"""<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>MLPerf {_e(benchmark)}: systems by time to train</title><style>{_CSS}</style></head><body>
<h1>MLPerf {_e(benchmark)}</h1>
<p class="meta">Systems compared by time to train (run_stop - run_start, the benchmark's score for one run):
the median of each system's successful runs, with their range. Throughput: samples over block time.
trainsweep {_e(__version__)}.</p>
{caveat}
<div class="scroll"><table class="sortable"><thead>{head}</thead><tbody>
{"".join(body)}
</tbody></table></div>
{_figures(figures or {})}
<script>{_JS}</script></body></html>
"""
    return page.encode()


def _ms(s: float | None) -> str:
    return "-" if s is None else f"{1000 * s:.1f}"


def _figures(figures: dict[str, tuple[str, bytes]]) -> str:
    if not figures:
        return ""
    parts = ["<h2>Per-step timelines of the instrumented runs</h2>"]
    for name, (caption, png) in figures.items():
        uri = "data:image/png;base64," + base64.b64encode(png).decode()
        parts.append(
            f'<figure><img src="{uri}" alt="{_e(name)}"><figcaption>{_e(caption)}</figcaption></figure>'
        )
    return "\n".join(parts)


def mlperf_artefacts(runs: list[RunTimings], region: str = "us-east-1") -> dict[str, bytes]:
    """``{mlperf/<benchmark>/systems.csv|report.html: bytes}`` for the MLPerf runs among ``runs``."""
    out: dict[str, bytes] = {}
    for benchmark, rows in benchmark_rows(runs, region).items():
        folder = f"{MLPERF_DIR}/{safe_name(benchmark)}"
        figures = timelines(rows)
        out[f"{folder}/{SYSTEMS_CSV}"] = systems_csv(rows)
        out[f"{folder}/{REPORT_HTML}"] = benchmark_html(benchmark, rows, figures)
        for name, (_, png) in figures.items():
            out[f"{folder}/{name}"] = png
    return out
