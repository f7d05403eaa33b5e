"""``trainsweep simulate``: replay a sweep strategy on recorded logs before paying for it.

See trainsweep/cli/__init__.py for the conventions (heavy imports inside the commands).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from trainsweep.cli.common import fail, make_console


def simulate_command(
    spec_path: Annotated[
        Path, typer.Argument(metavar="SPEC", help="Sweep spec (YAML or JSON): the strategy.")
    ],
    source: Annotated[
        Path,
        typer.Option("--from", help="Folder of complete training logs (anything `trainsweep import` reads)."),
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    region: Annotated[
        str | None, typer.Option(help="Region to price in (default: the spec's region, else us-east-1).")
    ] = None,
    workers: Annotated[
        int | None, typer.Option("--workers", min=1, help="Parallel processes reading the logs.")
    ] = None,
    race: Annotated[
        bool,
        typer.Option(
            "--race",
            help="Replay the racing strategy over SPEC's grid instead of SPEC's own (packed early-stop "
            "jobs that stop watching the configurations their intervals rule out), stage by stage.",
        ),
    ] = False,
) -> None:
    """What SPEC's strategy (mode, packing, repetitions, batch-size search, warm pool, target, phases)
    would cost, take and pick, replayed on the logs in the --from folder, beside the exhaustive grid of
    the same logs and its cost."""
    from trainsweep.errors import SpecError, TrainsweepError
    from trainsweep.importer import read_dir
    from trainsweep.race import RaceRule
    from trainsweep.simulate import simulate
    from trainsweep.spec import load_spec

    try:
        spec = load_spec(spec_path, allow_retired=True)
    except SpecError as e:
        raise fail(str(e)) from None
    if len(spec.node_counts) > 1:
        raise fail(
            f"{spec_path}: simulate replays one instance count per job, not the instance_counts axis "
            f"{spec.node_counts}: give instance_count (the logs' own count) instead"
        )
    try:
        logs = read_dir(source, workers=workers)
    except TrainsweepError as e:
        raise fail(str(e)) from None
    try:
        sim = simulate(
            spec, logs, region=region or spec.region or "us-east-1", race=RaceRule() if race else None
        )
    except TrainsweepError as e:
        raise fail(f"{spec_path} on {source}: {e}") from None
    if not sim.exhaustive["runs"]:
        raise fail(
            f"no complete log in {source} matches a configuration of {spec_path} "
            f"({len(sim.logs_outside_spec)} logs outside the spec's grid, "
            f"{len(sim.logs_unused)} not usable): nothing to replay"
            + "".join(f"\n  {x['path']}: {x['reason']}" for x in sim.logs_unused[:5])
        )
    if as_json:
        sys.stdout.write(json.dumps(sim.to_dict(), indent=2) + "\n")
        return
    _print(sim.to_dict())


def _usd(x: float | None) -> str:
    return "-" if x is None else f"${x:,.2f}"


def _dur(s: float | None) -> str:
    if s is None:
        return "-"
    from trainsweep.spec import format_duration

    return format_duration(s)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f} %"


def _config(c: dict[str, Any] | None) -> str:
    """``ml.g5.xlarge x 256``, with its setting (``dtype=bfloat16``) in a sweep with axes."""
    if c is None:
        return "-"
    from trainsweep.axes import label

    setting = f" {label(c['axes'])}" if c.get("axes") else ""
    return f"{c['instance_type']} x {c['batch_size']}{setting}"


def _first(items: list[Any], show: Callable[[Any], str], sep: str = ", ", most: int = 20) -> str:
    """``show`` of the first ``most`` items, joined by ``sep``, and `` ...`` when there are more."""
    return sep.join(show(x) for x in items[:most]) + (" ..." if len(items) > most else "")


def _print(d: dict[str, Any]) -> None:
    from rich.table import Table

    console = make_console(soft_wrap=False)
    s, e = d["strategy"], d["exhaustive"]
    warm = f", warm pool {s['warm_pool_seconds']} s" if s["warm_pool_seconds"] else ""
    ratio = "-" if d["cost_ratio"] is None else f"{d['cost_ratio']:.3f}"
    target = d["target"]
    to = f" to {target['metric']} {target['value']:g}" if target else ""
    exhaustive = (
        f"Exhaustive grid (every configuration and repetition, full runs{to}, one job each): {e['jobs']} "
        f"jobs, {_usd(e['cost_usd'])}, {_dur(e['wall_s'])}. Cost ratio {ratio}."
    )
    if s["mode"] == "race":
        _print_race(console, s)
    if d["phases"]:
        _print_phases(console, d, warm)
        console.print(
            f"Both phases: {s['jobs']} jobs over {s['runs']} runs, {_usd(s['cost_usd'])}, "
            f"{_dur(s['wall_s'])} wall-clock. {exhaustive}"
        )
    else:
        console.print(
            f"Strategy ({s['mode']}{to}, {s['packing']}, {s['repetitions']} repetition(s){warm}): "
            f"{s['jobs']} jobs over {s['runs']} runs, {_usd(s['cost_usd'])}, {_dur(s['wall_s'])} "
            f"wall-clock. {exhaustive}"
        )
    console.print(_start_ups(s, e), highlight=False)
    title = "what the strategy picks, and what the exhaustive grid shows"
    table = Table(title=title + (f" (time and cost{to})" if target else ""), show_lines=False)
    for col in ("", "strategy picks", "truth", "regret"):
        table.add_column(col)
    for name, by in (("fastest", "time"), ("cheapest", "cost"), ("recommended", "cost")):
        regret = d["regret"][name][by]
        table.add_row(
            name,
            _config(d["picks"][name]),
            _config(d["truth"][name]),
            "-" if regret is None else f"{_pct(regret)} {'slower' if by == 'time' else 'dearer'}",
        )
    if s["mode"] in ("early-stop", "phases"):
        runs = f"the scan's {d['phases']['scan']['runs']}" if d["phases"] else s["runs"]
        replayed = s["early_stop_replay"]  # both keys, always: simulate.replay_sweep counts each way
        console.print(
            f"Early stop: {s['early_stopped_runs']} of {runs} runs stopped before the spec's epochs "
            f"(the container's rule replayed step by step on {replayed['step']}, on whole epochs on "
            f"{replayed['epoch']}: logs of one epoch or without step times); the others would run to "
            "the end."
        )
    console.print(table)
    sp = d["repetition_spread"]
    console.print(
        f"Spread between repetitions (max - min over mean{',' + to if to else ''}): time of the true fastest "
        f"{_pct(sp['time_of_true_fastest'])}, cost of the true cheapest {_pct(sp['cost_of_true_cheapest'])}, "
        f"median time spread over configurations {_pct(sp['time_median'])}."
    )
    console.print(f"Prices: {d['prices']}.")
    _print_left_out(console, d)


def _start_ups(s: dict[str, Any], e: dict[str, Any]) -> str:
    """How much of each bill is its jobs' start-up (the per-job overhead of a job that starts cold)."""
    from trainsweep.cost import billing

    def share(b: dict[str, Any]) -> str:
        if b["cost_usd"]:
            return f"{_usd(b['start_up_usd'])}, {_pct(b['start_up_usd'] / b['cost_usd'])} of its cost"
        if b["billable_s"]:
            return f"{_dur(b['start_up_s'])}, {_pct(b['start_up_s'] / b['billable_s'])} of its billable time"
        return "none"

    return (
        f"Start-ups ({billing.FIXED_OVERHEAD_S:g} s for each job that starts cold): the strategy's "
        f"{share(s)}; the exhaustive grid's {share(e)}."
    )


def _print_left_out(console: Any, d: dict[str, Any]) -> None:
    """What the simulation skipped or could not use, and its notes."""
    s = d["strategy"]
    if s["skipped_by_search"]:
        skipped = s["skipped_by_search"]
        console.print(
            f"The batch-size search skipped {len(skipped)} run(s) past a throughput plateau: "
            + _first(skipped, lambda x: f"{_config(x)} (repetition {x['repetition'] + 1})")
        )
    if d["cells_without_logs"]:
        console.print(
            f"{len(d['cells_without_logs'])} spec configurations have no logs: "
            + ", ".join(_config(c) for c in d["cells_without_logs"])
        )
    if d["logs_outside_spec"]:
        console.print(
            f"{len(d['logs_outside_spec'])} logs match no configuration of the spec: "
            + _first(d["logs_outside_spec"], lambda x: f"{x['path']} ({_config(x)})")
        )
    if d["logs_unused"]:
        console.print(
            f"{len(d['logs_unused'])} logs not used: "
            + _first(d["logs_unused"], lambda x: f"{x['path']}: {x['reason']}", "; ")
        )
    if d["missed_target"]:
        console.print(
            f"{len(d['missed_target'])} configurations do not reach the target (never recommended): "
            + _first(d["missed_target"], lambda x: f"{_config(x)}: {x['reason']}", "; ")
        )
    for note in d["notes"]:
        console.print(f"Note: {note}")


def _print_race(console: Any, s: dict[str, Any]) -> None:
    """The race stage by stage: the looks each stage took, what it dropped and settled, its cost."""
    for st in s["stages"]:
        console.print(
            f"Race stage {st['stage']} (up to {st['steps']} steps each): watched "
            f"{st['configurations_watched']}, dropped {len(st['dropped'])}, settled {len(st['settled'])}, "
            f"{st['contenders_after']} still in; {_usd(st['cost_usd'])}"
            + (" (with the jobs' start-up)" if st["stage"] == 0 else "")
            + (f". Dropped: {_first(st['dropped'], str)}" if st["dropped"] else ""),
            highlight=False,
        )


def _print_phases(console: Any, d: dict[str, Any], warm: str) -> None:
    """The two phases of ``phases: [scan, confirm]``: what each paid, the ranking, what it confirmed."""
    p, target = d["phases"], d["target"]
    scan, confirm = p["scan"], p["confirm"]
    confirmed = {(c["instance_type"], c["batch_size"]) for c in p["confirmed"]}
    console.print(
        f"Phase 1, scan (early-stop, packed, 1 repetition{warm}): {scan['jobs']} jobs over {scan['runs']} "
        f"runs, {_usd(scan['cost_usd'])}, {_dur(scan['wall_s'])} wall-clock. Ranked by cost, then time "
        "to train: "
        + ", ".join(
            f"{i}. {_config(r)} {_usd(r['cost_to_train_usd'])}"
            + (" (confirmed)" if (r["instance_type"], r["batch_size"]) in confirmed else "")
            for i, r in enumerate(p["ranking"][:20], 1)
        )
        + (" ..." if len(p["ranking"]) > 20 else "")
    )
    console.print(
        f"Phase 2, confirm (the best {len(p['confirmed'])} of {len(p['ranking'])}, full runs to "
        f"{target['metric']} {target['value']:g}, one job per cell, {confirm['repetitions']} "
        f"repetition(s){warm}): {confirm['jobs']} jobs, {_usd(confirm['cost_usd'])}, "
        f"{_dur(confirm['wall_s'])} wall-clock. The picks come from the confirmed runs."
    )


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""
    app.command("simulate")(simulate_command)
