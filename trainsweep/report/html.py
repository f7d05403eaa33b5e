"""``report.html``: one self-contained page (inline CSS and JS, images as data URIs, no network)."""

from __future__ import annotations

import base64
import html
from collections.abc import Callable, Mapping
from typing import Any

from trainsweep import __version__
from trainsweep.axes import label
from trainsweep.cost.metrics import OK, ConfigMetrics
from trainsweep.report import throughput as extra
from trainsweep.report.analysis import SweepAnalysis
from trainsweep.stalls import NOT_STALLED_UTILISATION

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0 auto;max-width:1200px;
padding:1rem 2rem;color:#222;line-height:1.45}
h1{margin-bottom:.2rem}h2{border-bottom:1px solid #ddd;padding-bottom:.2rem;margin-top:2rem}
.meta{color:#666;font-size:.9rem}
p.pick{font-size:1.15rem;background:#eef7ee;border-left:4px solid #2a8a2a;padding:.6rem 1rem}
.caveat{background:#fdf3e1;border-left:4px solid #c98a00;padding:.6rem 1rem}
.none{background:#fff4e5;border-left-color:#d97a00}
table{border-collapse:collapse;font-size:.82rem;width:100%}
th,td{border:1px solid #ddd;padding:.25rem .4rem;text-align:right;white-space:nowrap}
td.t,th.t{text-align:left;white-space:normal}
td.t:last-child{min-width:16em}
table.configs td:first-child{white-space:nowrap}
td.clip{max-width:18em;min-width:8em;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
td.clip[title]{cursor:help;text-decoration:underline dotted #bbb}
th{background:#f3f3f3;cursor:pointer;position:sticky;top:0}
th.asc::after{content:" \\25B2"}th.desc::after{content:" \\25BC"}
tr.pick td{background:#eef7ee;font-weight:600}tr.bad td{color:#999}
.tag{font-size:.7rem;border-radius:3px;padding:0 .3rem;margin-left:.3rem;background:#2a8a2a;color:#fff}
.tag.front{background:#555}
figure{margin:1.2rem 0}figure img{max-width:100%;border:1px solid #eee}
figcaption{color:#555;font-size:.85rem}
dt{font-weight:600;margin-top:.5rem}dd{margin-left:1.2rem}
.sev-error{color:#b00020}
.scroll{overflow-x:auto}
@media (max-width:600px){body{padding:.5rem .8rem}h1{font-size:1.5rem}}
"""

# Sort a table by the clicked column: numbers by data-v, text otherwise; empty cells always last.
_JS = """
document.querySelectorAll('table.sortable').forEach(function (table) {
  var heads = table.querySelectorAll('th');
  heads.forEach(function (th, col) {
    th.addEventListener('click', function () {
      var asc = !th.classList.contains('asc');
      heads.forEach(function (h) { h.classList.remove('asc', 'desc'); });
      th.classList.add(asc ? 'asc' : 'desc');
      var body = table.tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (a, b) {
        var x = a.cells[col].getAttribute('data-v'), y = b.cells[col].getAttribute('data-v');
        if (x === null) { x = a.cells[col].textContent; y = b.cells[col].textContent; }
        if (x === '' && y === '') { return 0; }
        if (x === '') { return 1; }
        if (y === '') { return -1; }
        var nx = parseFloat(x), ny = parseFloat(y), r;
        r = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : String(x).localeCompare(String(y));
        return asc ? r : -r;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
});
"""


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _n(x: float | None, fmt: str = "{:.3g}") -> str:
    return "" if x is None else fmt.format(x)


def _dur(s: float | None) -> str:
    if s is None:
        return ""
    if s >= 3600:
        return f"{s / 3600:.2f} h"
    if s >= 120:
        return f"{s / 60:.1f} min"
    return f"{s:.1f} s"


def _pm(v: float | None, sd: float | None, fmt: str, scale: float = 1.0) -> str:
    if v is None:
        return ""
    txt = fmt.format(v * scale)
    if sd:
        txt += " ± " + fmt.format(sd * scale)
    return txt


Column = tuple[str, Callable[[ConfigMetrics], Any], Callable[[ConfigMetrics], str], bool]


def _columns() -> list[Column]:
    # (header, sort value, display text, is text)
    return [
        ("Instance type", lambda r: r.instance_type, lambda r: r.machine, True),
        ("GPUs", lambda r: r.gpus, lambda r: _n(r.gpus, "{}"), False),
        ("Batch size", lambda r: r.batch_size, lambda r: _n(r.batch_size, "{}"), False),
        ("Setting", lambda r: label(r.axes), lambda r: label(r.axes), True),
        ("Runs", lambda r: r.runs, lambda r: f"{r.runs}/{r.attempts}", False),
        (
            "Step (ms)",
            lambda r: r.step_time_s,
            lambda r: _pm(r.step_time_s, r.step_time_std_s, "{:.1f}", 1000),
            False,
        ),
        (
            "Samples/s",
            lambda r: r.samples_per_s,
            lambda r: _pm(r.samples_per_s, r.samples_per_s_std, "{:,.0f}"),
            False,
        ),
        (
            "Epoch (s)",
            lambda r: r.epoch_time_s,
            lambda r: _pm(r.epoch_time_s, r.epoch_time_std_s, "{:.2f}"),
            False,
        ),
        ("Time to train", lambda r: r.time_to_train_s, lambda r: _dur(r.time_to_train_s), False),
        ("Billable (s)", lambda r: r.billable_s, lambda r: _n(r.billable_s, "{:.0f}"), False),
        ("USD/h", lambda r: r.usd_per_hour, lambda r: _n(r.usd_per_hour, "{:.3f}"), False),
        ("USD/epoch", lambda r: r.cost_per_epoch_usd, lambda r: _n(r.cost_per_epoch_usd, "{:.4f}"), False),
        ("USD to train", lambda r: r.cost_to_train_usd, lambda r: _n(r.cost_to_train_usd, "{:.4f}"), False),
        ("Samples/USD", lambda r: r.samples_per_usd, lambda r: _n(r.samples_per_usd, "{:,.0f}"), False),
        (
            "Iterations/USD",
            lambda r: r.iterations_per_usd,
            lambda r: _n(r.iterations_per_usd, "{:,.0f}"),
            False,
        ),
        (
            "Data wait",
            lambda r: r.data_wait_share,
            lambda r: "" if r.data_wait_share is None else f"{100 * r.data_wait_share:.1f}%",
            False,
        ),
        (
            "GPU memory",
            lambda r: r.gpu_memory_share,
            lambda r: "" if r.gpu_memory_share is None else f"{100 * r.gpu_memory_share:.0f}%",
            False,
        ),
        (
            "Eval accuracy",
            lambda r: r.eval_accuracy,
            lambda r: _pm(r.eval_accuracy, r.eval_accuracy_se, "{:.3f}"),
            False,
        ),
        ("Time to target", lambda r: r.time_to_target_s, lambda r: _dur(r.time_to_target_s), False),
        (
            "USD to target",
            lambda r: r.cost_to_target_usd,
            lambda r: _n(r.cost_to_target_usd, "{:.4f}"),
            False,
        ),
        ("Quality", lambda r: r.quality or r.accuracy_note, lambda r: r.quality or r.accuracy_note, True),
        ("Status", lambda r: r.status, lambda r: r.status, True),
        ("Notes", lambda r: r.notes, lambda r: r.notes, True),
    ]


_QUALITY_COLUMNS = {"Eval accuracy": "eval_accuracy", "Quality": "quality"}
_CLIPPED = ("Quality", "Notes")
"""Text columns shown one line high: the verdict or the start of the note, the whole text as a tooltip."""
_TARGET_COLUMNS = ("Time to target", "USD to target")


_COST_COLUMNS = ("USD/h", "USD/epoch", "USD to train", "Samples/USD", "Iterations/USD", "USD to target")


def _shown_columns(a: SweepAnalysis) -> list[Column]:
    """The table's columns: the setting of the axes only in a sweep with axes, the quality ones only when
    a run evaluated, the target ones with a target,
    the cost ones when some configuration has a price (else they are all 0 or empty)."""
    evaluated = any(r.eval_accuracy is not None for r in a.rows)
    with_axes = any(r.axes for r in a.rows)
    return [
        c
        for c in _columns()
        if (c[0] != "Setting" or with_axes)
        and (c[0] not in _QUALITY_COLUMNS or evaluated)
        and (c[0] not in _TARGET_COLUMNS or a.recommendation.target is not None)
        and (c[0] not in _COST_COLUMNS or a.priced)
    ]


def _config_table(a: SweepAnalysis) -> str:
    rec = a.recommendation
    front = {id(r) for r in rec.pareto}
    cols = _shown_columns(a)
    head = "".join(f'<th class="t">{_e(h)}</th>' if t else f"<th>{_e(h)}</th>" for h, _, _, t in cols)
    body = []
    for r in a.rows:
        cls = "pick" if r is rec.pick else ("bad" if r.status != OK or r.quality else "")
        cells = []
        for i, (head_text, val, txt, is_text) in enumerate(cols):
            v = val(r)
            text = _e(txt(r))
            if i == 0:
                if r is rec.pick:
                    text += '<span class="tag">recommended</span>'
                elif id(r) in front:
                    text += '<span class="tag front">Pareto</span>'
            if head_text in _CLIPPED:
                cells.append(_clipped(txt(r), short=head_text == "Quality"))
            elif is_text:
                cells.append(f'<td class="t">{text}</td>')
            else:
                cells.append(f'<td data-v="{"" if v is None else _e(v)}">{text}</td>')
        body.append(f'<tr class="{cls}">{"".join(cells)}</tr>')
    return (
        '<div class="scroll"><table id="sweep-table" class="sortable configs">'
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>"
    )


def _clipped(text: str, *, short: bool) -> str:
    """A one-line cell: the verdict before the first colon (``short``) or the text cut at the cell's
    width, the whole text in the tooltip (and sorted on)."""
    if not text:
        return '<td class="t clip"></td>'
    shown = text.split(":", 1)[0] if short else text
    return f'<td class="t clip" title="{_e(text)}" data-v="{_e(text)}">{_e(shown)}</td>'


def _recommendation(a: SweepAnalysis) -> str:
    rec = a.recommendation
    lines = rec.sentences()
    caveat = rec.caveat()
    if caveat is not None:
        lines = lines[1:]
    cls = "pick" if rec.pick is not None else "pick none"
    first, rest = lines[0], lines[1:]
    items = "".join(f"<li>{_e(s)}</li>" for s in rest)
    head = f'<p class="caveat" id="not-judged">{_e(caveat)}</p>' if caveat is not None else ""
    return f'{head}<p class="{cls}">{_e(first)}</p><ul>{items}</ul>'


def _search(a: SweepAnalysis) -> str:
    """``batch_sizes: auto``: per instance type, the feasible range, its largest batch size, the
    out-of-memory edge and the throughput curve (the "throughput" plot draws it)."""
    if not a.batch_size_search:
        return ""
    items = []
    for itype, s in a.batch_size_search.items():
        rng = s["feasible"]
        fits = (
            f"batch sizes {rng[0]} to {rng[1]} trained; largest feasible {s['largest_feasible']}"
            if rng
            else "no batch size trained"
        )
        edge = f"; out of memory at {s['out_of_memory_at']}" if s["out_of_memory_at"] else ""
        curve = ", ".join(f"{c['batch_size']}: {c['samples_per_s']:,.0f}" for c in s["curve"])
        items.append(
            f"<li><b>{_e(itype)}</b>: {_e(fits)}{_e(edge)} (search stopped: {_e(s['stopped'])}). "
            f"Samples/s by batch size: {_e(curve) or 'none'}.</li>"
        )
    return (
        '<section id="batch-size-search"><h2>Batch-size search</h2><p>batch_sizes: auto doubled the batch '
        "size from its minimum until out of memory, its maximum, or a throughput plateau.</p>"
        f"<ul>{''.join(items)}</ul></section>"
    )


def _best_settings(a: SweepAnalysis) -> str:
    """A sweep with axes: per instance type, the setting (and batch size) that trains fastest and the
    one that trains cheapest, and how far behind the best of the other settings is."""
    if not a.best_settings:
        return ""
    body = []
    for b in a.best_settings:
        fast = b["by"] == "time"
        value = _dur(b["time_to_train_s"]) if fast else _n(b["cost_to_train_usd"], "${:.4f}")
        behind = b["other_settings_behind"]
        other = "no other setting trained" if behind is None else f"+{100 * behind:.1f}%"
        machine = b["instance_type"] + (f" x{b['instance_count']}" if b["instance_count"] > 1 else "")
        body.append(
            f"<tr><td class='t'>{_e(machine)}</td><td class='t'>{'fastest' if fast else 'cheapest'}</td>"
            f"<td class='t'>{_e(label(b['axes']))}{_not_honoured(b)}</td><td>{_n(b['batch_size'], '{}')}</td>"
            f"<td>{_e(value)}</td><td>{_e(other)}</td></tr>"
        )
    head = (
        "<tr><th class='t'>Instance type</th><th class='t'>Best by</th><th class='t'>Setting</th>"
        "<th>Batch size</th><th>To train</th><th>Best other setting</th></tr>"
    )
    return (
        '<section id="best-settings"><h2>Best settings per instance type</h2>'
        "<p>For each instance type, the setting of the axes (with its batch size) that trains fastest and, "
        "with prices, the one that trains cheapest, among the configurations the recommendation judges; "
        "the last column says how much slower (dearer) the best configuration of any other setting is.</p>"
        f'<table id="best-settings-table"><thead>{head}</thead><tbody>{"".join(body)}</tbody></table>'
        "</section>"
    )


def _not_honoured(best: dict[str, Any]) -> str:
    """A best setting its runs did not honour: said in its cell, so that the table never names it silently."""
    said = best.get("not_honoured") or []
    return "".join(f"<br><b>{_e(text)}</b>" for text in said)


def _no_prices(a: SweepAnalysis) -> str:
    """One line instead of cost plots of zeros, when no configuration has a price."""
    if a.priced:
        return ""
    local = any(r.platform == "local" for r in a.rows)
    why = "local runs cost nothing" if local else "no instance type of the sweep has a known price"
    return (
        f'<p id="no-prices">No cost plots: no configuration has a price ({why}), so cost per epoch and '
        "time against cost would show only zeros; time to train is plotted instead, and the table "
        "leaves out its cost columns.</p>"
    )


def _plots(plots: Mapping[str, tuple[str, bytes]]) -> str:
    out = []
    for name, (caption, png) in plots.items():
        data = base64.b64encode(png).decode("ascii")
        out.append(
            f'<figure id="plot-{_e(name)}"><img src="data:image/png;base64,{data}" alt="{_e(caption)}">'
            f"<figcaption>{_e(caption)}</figcaption></figure>"
        )
    return "".join(out)


def _scaling(a: SweepAnalysis) -> str:
    """Throughput, scaling efficiency and iterations per dollar per instance count (node-count sweeps)."""
    if not any(r.instance_count > 1 for r in a.rows):
        return ""
    head = (
        "<tr><th class='t'>Instance type</th><th>Batch size</th><th>Instances</th><th>Samples/s</th>"
        "<th>Scaling efficiency</th><th>Iterations/USD</th><th>USD to train</th>"
        "<th class='t'>Status</th></tr>"
    )
    body = []
    for r in sorted(a.rows, key=lambda r: (r.instance_type, r.platform, r.batch_size or 0, r.instance_count)):
        eff = "1 node" if r.instance_count == 1 and r.samples_per_s else _n(r.scaling_efficiency, "{:.0%}")
        if r.instance_count > 1 and r.scaling_efficiency is None and r.status == OK:
            eff = "no 1-node run"
        body.append(
            f"<tr><td class='t'>{_e(r.instance_type)}</td><td>{_n(r.batch_size, '{}')}</td>"
            f"<td>{r.instance_count}</td><td>{_e(_n(r.samples_per_s, '{:,.0f}'))}</td><td>{_e(eff)}</td>"
            f"<td>{_e(_n(r.iterations_per_usd, '{:,.0f}'))}</td>"
            f"<td>{_e(_n(r.cost_to_train_usd, '{:.4f}'))}</td>"
            f"<td class='t'>{_e(r.status)}</td></tr>"
        )
    return (
        '<section id="scaling"><h2>Scaling over nodes</h2>'
        "<p>Scaling efficiency = samples/s of N instances / (N x samples/s of one instance), same type and "
        "batch size (the batch size is global: split over every instance's ranks); 100% is linear. "
        "Iterations/USD and USD to train count every instance of the job.</p>"
        f"{_efa_note(a)}"
        f'<table id="scaling-table"><thead>{head}</thead><tbody>{"".join(body)}</tbody></table></section>'
    )


def _efa_note(a: SweepAnalysis) -> str:
    """A warning for multi-node rows of EFA types: the stack's image reaches EFA through no NCCL plug-in."""
    from trainsweep.instances import EFA_NOTE, EFA_TRAINING_TYPES

    types = sorted(
        {r.instance_type for r in a.rows if r.instance_count > 1 and r.instance_type in EFA_TRAINING_TYPES}
    )
    if not types:
        return ""
    note = f"{', '.join(types)}: {EFA_NOTE} (unless the sweep already ran one)."
    return f"<p class='warn' id='efa-note'>{_e(note)}</p>"


def _stalls(a: SweepAnalysis) -> str:
    rows = [r for r in a.rows if r.status == OK and r.data_wait_share is not None]
    if not rows:
        return (
            "<p>No run reports its data-wait vs compute split (older logs only print whole step times), "
            "so no stall figures can be given. Runs made by the trainsweep container report it.</p>"
        )
    head = (
        "<tr><th class='t'>Configuration</th><th>Data wait</th><th>Utilisation</th><th>Stalled?</th>"
        "<th>USD waiting</th><th>Step now (ms)</th><th>Loading aligned (ms)</th><th>Data free (ms)</th></tr>"
    )
    body = []
    for r in rows:
        util = r.utilisation or 0.0
        body.append(
            f"<tr><td class='t'>{_e(r.label)}</td>"
            f"<td data-v='{r.data_wait_share}'>{100 * (r.data_wait_share or 0):.1f}%</td>"
            f"<td data-v='{util}'>{100 * util:.1f}%</td>"
            f"<td class='t'>{'yes' if util < NOT_STALLED_UTILISATION else 'no'}</td>"
            f"<td data-v='{r.usd_waiting or ''}'>{_n(r.usd_waiting, '{:.4f}')}</td>"
            f"<td>{_n(r.step_time_s and r.step_time_s * 1000, '{:.1f}')}</td>"
            f"<td>{_n(r.aligned_step_s and r.aligned_step_s * 1000, '{:.1f}')}</td>"
            f"<td>{_n(r.free_step_s and r.free_step_s * 1000, '{:.1f}')}</td></tr>"
        )
    return (
        f"<p>Utilisation = compute / (compute + data wait); at or above "
        f"{100 * NOT_STALLED_UTILISATION:.0f}% a configuration counts as not stalled (MLPerf Storage). "
        '"Loading aligned": the step if every rank waited only the mean wait of the ranks; '
        '"data free": compute only.</p>'
        f'<div class="scroll"><table class="sortable"><thead>{head}</thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def _quality(a: SweepAnalysis) -> str:
    if not a.warnings:
        return "<p>No data-quality warnings.</p>"
    body = []
    for w in a.warnings:
        sev = str(w.get("severity") or "warning")
        line = w.get("line")
        body.append(
            f"<tr><td class='t sev-{_e(sev)}'>{_e(sev)}</td><td class='t'>{_e(w.get('source', ''))}</td>"
            f"<td class='t'>{_e(w.get('run', ''))}</td><td class='t'>{_e(w.get('code', ''))}</td>"
            f"<td data-v='{'' if line is None else line}'>{'' if line is None else _e(line)}</td>"
            f"<td class='t'>{_e(w.get('message', ''))}</td></tr>"
        )
    return (
        f"<p>{len(a.warnings)} finding(s). Runs with problems still count unless they failed; check them.</p>"
        '<div class="scroll"><table class="sortable"><thead><tr>'
        '<th class="t">Severity</th><th class="t">Source</th>'
        '<th class="t">Run</th><th class="t">Check</th><th>Line</th><th class="t">Message</th></tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def _runs(a: SweepAnalysis) -> str:
    body = []
    for m in a.run_metrics:
        body.append(
            f"<tr><td class='t'>{_e(m.name)}</td><td class='t'>{_e(m.instance_type or '')}</td>"
            f"<td data-v='{m.batch_size or ''}'>{_n(m.batch_size, '{}')}</td>"
            f"<td class='t'>{_e(m.status)}</td><td data-v='{m.epochs_measured}'>{m.epochs_measured}</td>"
            f"<td data-v='{m.step_s or ''}'>{_n(m.step_s and m.step_s * 1000, '{:.2f}')}</td>"
            f"<td data-v='{m.first_epoch_s or ''}'>{_n(m.first_epoch_s, '{:.2f}')}</td>"
            f"<td data-v='{m.epoch_s or ''}'>{_n(m.epoch_s, '{:.2f}')}</td>"
            f"<td data-v='{m.time_to_train_s or ''}'>{_dur(m.time_to_train_s)}</td>"
            f"<td data-v='{m.billable_s or ''}'>{_n(m.billable_s, '{:.0f}')}</td>"
            f"<td class='t'>{_e(m.billable_source or '')}</td>"
            f"<td class='t'>{_e(m.reason or '')}</td></tr>"
        )
    return (
        f"<details><summary>{len(a.run_metrics)} runs (click to show)</summary>"
        '<div class="scroll"><table class="sortable"><thead><tr>'
        '<th class="t">Run</th><th class="t">Instance type</th>'
        '<th>Batch size</th><th class="t">Status</th><th>Epochs</th><th>Step (ms)</th><th>Epoch 1 (s)</th>'
        '<th>Epoch (s)</th><th>Time to train</th><th>Billable (s)</th><th class="t">Billable from</th>'
        f'<th class="t">Reason</th></tr></thead><tbody>{"".join(body)}</tbody></table></div></details>'
    )


def _method(a: SweepAnalysis) -> str:
    items = _timing_and_cost_terms(a) + _judgement_terms()
    return "<dl>" + "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in items) + "</dl>"


def _timing_and_cost_terms(a: SweepAnalysis) -> list[tuple[str, str]]:
    """How the table's times and costs are made, with this sweep's epochs, overhead, region and prices."""
    epochs = a.epochs if a.epochs is not None else "as many as each log shows"
    if a.epochs is not None and not (a.spec or {}).get("workload"):
        epochs = f"{a.epochs} (the most common epoch count of the runs; no spec says otherwise)"
    return [
        (
            "Steady step time",
            "Mean step time of the primary rank, leaving out the first step of every epoch (warm-up and the "
            "restart of the data pipeline). ± is the standard deviation over repetitions.",
        ),
        ("Samples/s", "Batch size (global, per step) / steady step time."),
        (
            "Epoch time",
            "Mean measured time of epochs 2..n (epoch 1 includes the warm-up); with only one epoch, its "
            "steady steps plus its validation.",
        ),
        (
            "Time to train",
            f"The training loop for {epochs} epochs: measured when the run did exactly that many (a "
            "longer run: its first epochs), else epoch 1 + (epochs - 1) x epoch time.",
        ),
        (
            "Billable time",
            "BillableTimeInSeconds from DescribeTrainingJob when the job record has it; otherwise a fixed "
            f"per-job overhead of {a.overhead_s:.1f} s plus the time to train. The overhead "
            "(container start, data download, initialisation, upload) is the median of billable minus "
            "in-log fit() time over four real ml.p3.2xlarge SageMaker jobs (129.5-140.2 s; the log "
            "explained only 30-37% of the bill). Runs that shared one packed job are modelled too.",
        ),
        ("Prices", f"On-demand SageMaker training USD per instance-hour in {a.region}: {a.prices}."),
        ("USD/epoch", f"Epoch time x price x {a.instance_count} instance(s)."),
        ("USD to train", "Billable time x price x instances: what the full training would cost."),
        ("Samples/USD", "Samples/s x 3600 / (price x instances)."),
        (
            "Iterations/USD",
            "(3600 / price - one-off seconds) x ranks / step time, with ranks = 1 and no one-off "
            "seconds here (the per-job overhead is in USD to train). Dollar-seconds are not multiplied "
            "by the number of ranks: ranks share the instance they run on.",
        ),
    ]


def _judgement_terms() -> list[tuple[str, str]]:
    """How waits, memory, quality, the recommendation and the status are judged."""
    return [
        (
            "Data wait, utilisation, USD waiting",
            "From the per-step data-wait and compute times (first step left out): share = wait / "
            "(wait + compute), utilisation = compute / (wait + compute), USD waiting = share x time to "
            "train x price.",
        ),
        (
            "GPU memory",
            "The largest share of the GPU's memory one repetition's process held (PyTorch's reserved "
            "peak / the device's memory, rank 0), as the container logs it on a GPU: the headroom left "
            "for a larger batch.",
        ),
        (
            "Recommendation",
            "Among configurations with status ok: fastest = least time to train, cheapest = least USD to "
            "train, Pareto set = those no other configuration beats on both. With a deadline: the cheapest "
            "that meets it; with a budget: the fastest within it; with neither: the cheapest (the fastest "
            "when nothing has a price). Others within 5% of the pick on the deciding quantity are named "
            "beside it. A configuration flagged 'learns worse' or 'too short to judge' is set aside; when "
            "it would have been the fastest or the cheapest, the recommendation says by how much and why.",
        ),
        (
            "Eval accuracy, Quality",
            "Eval accuracy: mean over repetitions of each run's last evaluation, ± its standard error (the "
            "larger of the spread over repetitions / sqrt(runs) and the binomial standard error of an "
            "accuracy on the evaluation's samples). Without a target, a configuration more than the spec's "
            "quality_margin (default 0.02) below the best is 'not distinguishable' when the gap is within "
            "two standard errors of the difference (it is still compared), 'too short to judge' when its "
            "runs made fewer optimizer steps than the best needed to come within the margin of its final "
            "accuracy (the same epochs give a larger batch fewer updates: a target compares time to the "
            "same accuracy), and 'learns worse' otherwise. With a target, time and USD are to reach it "
            "(start of training to the end of the first evaluation at or above it, MLPerf's time-to-train; "
            "billed with the per-job overhead), and a configuration one of whose runs never reached it is "
            "flagged. Hover over a Quality or Notes cell for its whole text.",
        ),
        (
            "Status",
            "ok when at least one repetition produced steps; infeasible when the job ran out of memory "
            "(or was planned so); skipped when batch_sizes: auto stopped at a throughput plateau before it "
            "(not run, not a failure); failed otherwise. Failed repetitions of an ok configuration are "
            "named in its notes.",
        ),
    ]


def _rows_are(a: SweepAnalysis) -> str:
    what = "One row per instance type (x instances per job, when more than one) and batch size"
    return what + (" and setting of the axes" if any(r.axes for r in a.rows) else "")


def render_report(
    a: SweepAnalysis, plots: Mapping[str, tuple[str, bytes]], *, title: str | None = None
) -> bytes:
    """The report page as UTF-8 bytes."""
    name = title or (a.spec or {}).get("name") or "sweep"
    ok = sum(1 for r in a.rows if r.status == OK)
    meta = (
        f"{len(a.runs)} runs, {len(a.rows)} configurations ({ok} ok), region {a.region}, "
        f"prices: {a.prices}. trainsweep {__version__}."
    )
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>trainsweep report: {_e(name)}</title>
<style>{_CSS}</style></head>
<body>
<h1>trainsweep report: {_e(name)}</h1>
<p class="meta">{_e(meta)}</p>
<section id="recommendation"><h2>Recommendation</h2>{_recommendation(a)}</section>
{_search(a)}{_best_settings(a)}<section id="configurations"><h2>Configurations</h2>
<p>{_e(_rows_are(a))}, aggregated over
repetitions. Click a column header to sort.</p>
{_config_table(a)}</section>
{_scaling(a)}{extra.tokens_and_mfu(a)}
<section id="plots"><h2>Plots</h2>{_no_prices(a)}{_plots(plots)}</section>
<section id="stalls"><h2>Data stalls</h2>{_stalls(a)}</section>
{extra.loader_workers(a)}<section id="quality"><h2>Data quality</h2>{_quality(a)}</section>
<section id="runs"><h2>Runs</h2>{_runs(a)}</section>
<section id="method"><h2>How every number was computed</h2>{_method(a)}</section>
<script>{_JS}</script>
</body></html>
"""
    return page.encode("utf-8")
