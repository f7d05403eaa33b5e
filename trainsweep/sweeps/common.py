"""What every driver does around a sweep: the note on a resume's spec, and the end of a run (the failed
execution's detail in a log file, a phase's record, the events told)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainsweep import atomicio
from trainsweep.sweeps.result import SweepEvents, SweepRun


def log_path_for(dest: Path) -> Path:
    """``<out>/<sweep-id>.log``: beside the sweep's folder, so a resume does not upload it."""
    return dest.parent / f"{dest.name}.log"


def spec_change_note(
    saved: Any, spec_source: Path | dict[str, Any], sweep_id: str, code_digest: str | None = None
) -> str | None:
    """What to tell the user when the spec given to a resume is not the sweep's own (the given one runs);
    None when they agree. ``code_digest``: the digest of the script's folder as the resume packed it
    (another archive than the sweep's means other code for the re-run cells)."""
    from trainsweep.aws import resume
    from trainsweep.spec import load_spec

    if not isinstance(saved, dict):
        return None
    changed = resume.spec_differences(saved, load_spec(spec_source).to_dict(), sweep_id, code_digest)
    if not changed:
        return None
    return (
        f"note: {spec_source} differs from sweep {sweep_id}'s spec in {', '.join(changed)}; "
        "the re-run cells use the spec given here"
        + (" and the script's files as they are now" if resume.CODE_CHANGED in changed else "")
        + "."
    )


def write_record(dest: Path, record: dict[str, Any] | None) -> None:
    """A phase's :data:`trainsweep.phases.PHASES_FILE` in its downloaded folder."""
    from trainsweep.phases import PHASES_FILE

    if record is not None and dest.is_dir():
        atomicio.write_json(dest / PHASES_FILE, record)


def finish(
    run: SweepRun, events: SweepEvents, record: dict[str, Any] | None = None, spec: Any = None
) -> SweepRun:
    """The end of every sweep: a failed execution's whole detail (e.g. a refusing Lambda's JSON error
    with its stack trace: for a log file, not the terminal) appended to ``<out>/<sweep-id>.log``, a
    phase's record written, the events told, then the results exported to the ``spec``'s ``tracking``
    (:func:`trainsweep.sweeps.track.export_tracked`)."""
    if run.execution_status != "SUCCEEDED" and run.error_detail:
        log = log_path_for(run.dest)
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("a", encoding="utf-8") as f:
            f.write(run.error_detail)
        run.detail_log = log
    write_record(run.dest, record)
    events.finished(run)
    if spec is not None and spec.tracking is not None:
        from trainsweep.sweeps.track import export_tracked

        export_tracked(run, spec, events)
    return run
