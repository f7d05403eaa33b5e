"""The report's sections on language-model and hardware figures (tokens, MFU) and on loader workers
(measured against predicted data wait). Each is empty when the sweep has nothing for it."""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING, Any

from trainsweep.loader_workers import comparisons, workers_axis

if TYPE_CHECKING:
    from trainsweep.report.analysis import SweepAnalysis


def _n(x: float | None, fmt: str) -> str:
    return "" if x is None else fmt.format(x)


def _cell(x: float | None, fmt: str) -> str:
    return f"<td data-v='{'' if x is None else x}'>{escape(_n(x, fmt))}</td>"


def _table(table_id: str, head: list[str], body: list[str]) -> str:
    ths = "".join(
        f"<th class='t'>{escape(h)}</th>" if i == 0 else f"<th>{escape(h)}</th>" for i, h in enumerate(head)
    )
    return (
        f'<div class="scroll"><table id="{table_id}" class="sortable"><thead><tr>{ths}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def tokens_and_mfu(a: SweepAnalysis) -> str:
    """Tokens/s, tokens per dollar, cost per million tokens and MFU per configuration."""
    tokens = any(r.tokens_per_sample is not None for r in a.rows)
    mfu = any(r.flops_per_sample is not None or r.mfu_note for r in a.rows)
    if not tokens and not mfu:
        return ""
    head = ["Configuration", "Samples/s"]
    head += ["Tokens/sample", "Tokens/s", "Tokens/USD", "USD per 1M tokens"] if tokens else []
    head += ["GFLOPs/sample", "MFU", "MFU against / why none"] if mfu else []
    body = []
    for r in a.rows:
        if r.status != "ok":
            continue
        cells = [f"<td class='t'>{escape(r.label)}</td>", _cell(r.samples_per_s, "{:,.1f}")]
        if tokens:
            cells += [
                _cell(r.tokens_per_sample, "{:,.0f}"),
                _cell(r.tokens_per_s, "{:,.0f}"),
                _cell(r.tokens_per_usd, "{:,.0f}"),
                _cell(r.usd_per_million_tokens, "{:.4f}"),
            ]
        if mfu:
            gflops = r.flops_per_sample / 1e9 if r.flops_per_sample is not None else None
            cells += [
                _cell(gflops, "{:.3f}"),
                _cell(r.mfu, "{:.1%}"),
                f"<td class='t'>{escape(r.mfu_note or '')}</td>",
            ]
        body.append(f"<tr>{''.join(cells)}</tr>")
    return (
        '<section id="tokens-mfu"><h2>Tokens and model FLOPs utilisation</h2>'
        "<p>Tokens/s = samples/s x tokens per sample; tokens per dollar and cost per million tokens use the "
        "instance's price. MFU = FLOPs of one training step (counted once per run with PyTorch's FLOP "
        "counter: matrix products and convolutions, forward and backward) / steady step time / the "
        "accelerators' dense peak in the step's precision (the instance catalogue's).</p>"
        f"{_table('tokens-mfu-table', head, body)}</section>"
    )


def loader_workers(a: SweepAnalysis) -> str:
    """The measured data-wait share of each loader-workers setting next to the predicted one."""
    groups = comparisons(a.rows)
    if not groups:
        return ""
    axis = workers_axis(a.rows)
    head = [
        "Configuration",
        "Workers",
        "Data wait measured",
        "Data wait predicted",
        "Step measured (ms)",
        "Step predicted (ms)",
        "Data free (ms)",
    ]
    body = []
    for group in groups:
        for w in group:
            step: Any = w.config.step_time_s
            body.append(
                f"<tr><td class='t'>{escape(w.config.label)}</td><td>{w.workers}</td>"
                f"{_cell(w.measured_share, '{:.1%}')}{_cell(w.predicted_share, '{:.1%}')}"
                f"{_cell(step and step * 1000, '{:.1f}')}"
                f"{_cell(w.predicted_step_s and w.predicted_step_s * 1000, '{:.1f}')}"
                f"{_cell(w.baseline.free_step_s and w.baseline.free_step_s * 1000, '{:.1f}')}</tr>"
            )
    return (
        f'<section id="loader-workers"><h2>Loader workers ({escape(str(axis))})</h2>'
        "<p>Each configuration's measured data-wait share next to the one predicted from the configuration "
        "with the fewest workers: its per-batch loading time spread over N workers that load while the step "
        'computes. "Data free": the step with no wait at all (the data-stall what-if).</p>'
        f"{_table('loader-workers-table', head, body)}</section>"
    )
