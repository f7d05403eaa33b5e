"""``trainsweep logs JOB_NAME``: an existing SageMaker training job's complete CloudWatch log.

What the seed's ``get-log.sh`` did, without its truncation: every stream of the job
(``<job>/algo-<host>-<epoch>``, one per host, in host order), each paged forward to its end
(:mod:`trainsweep.aws.cloudwatch`: the end is a forward token that repeats, not the first empty page).
One line per log event, as ``trainsweep parse`` and ``trainsweep import`` read it.

``--local``: a job of a local sweep, whose output local mode keeps in the sweep's downloaded folder
(``<results>/<sweep-id>/job-output/<job>/<host>.txt``, :data:`trainsweep.layout.JOB_OUTPUT_DIR`).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, BinaryIO

import typer

from trainsweep.aws.config import DEFAULT_TRAINING_LOG_GROUP as DEFAULT_LOG_GROUP
from trainsweep.cli.common import ProfileOpt, RegionOpt, aws_session, fail, make_console


def register(app: typer.Typer) -> None:
    """Add logs to the app."""
    app.command("logs")(logs)


def logs(
    job_name: Annotated[str, typer.Argument(metavar="JOB_NAME", help="SageMaker training job name.")],
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write the log to this file (default: stdout).")
    ] = None,
    log_group: Annotated[
        str, typer.Option("--log-group", help="CloudWatch log group of the training jobs.")
    ] = DEFAULT_LOG_GROUP,
    local: Annotated[
        bool, typer.Option("--local", help="A job of a local sweep: its output kept under --results.")
    ] = False,
    results: Annotated[
        Path, typer.Option("--results", help="With --local: the folder local sweeps download to.")
    ] = Path("trainsweep-results"),
    profile: ProfileOpt = None,
    region: RegionOpt = None,
) -> None:
    """Fetch a training job's complete log: every host's CloudWatch stream, paged to its end (or, with
    --local, what a local job's processes wrote)."""
    if out is not None and out.is_dir():
        raise fail(f"--out {out} is a folder: give a file name")
    if local:
        _local_logs(job_name, results, out)
        return
    from botocore.exceptions import BotoCoreError, ClientError

    from trainsweep.aws.cloudwatch import UnfinishedStreamError, job_streams, stream_lines
    from trainsweep.errors import TrainsweepError

    try:
        client = aws_session(profile, region).client("logs")
        streams = job_streams(client, log_group, job_name)
    except TrainsweepError as e:
        raise fail(str(e)) from None
    except (BotoCoreError, ClientError) as e:
        raise fail(f"cannot list the log streams of {job_name} in {log_group}: {e}") from None
    if not streams:
        raise fail(
            f"no CloudWatch log stream for training job {job_name!r} in {log_group} "
            "(is the name right, and the region the job ran in?)"
        )
    partial = out.with_name(f".{out.name}.partial") if out is not None else None
    lines = 0
    try:
        with _sink(partial) as sink:
            for stream in streams:
                for line in stream_lines(client, log_group, stream):
                    sink.write(line)
                    lines += 1
    except (UnfinishedStreamError, BotoCoreError, ClientError, OSError) as e:
        if partial is not None:
            partial.unlink(missing_ok=True)
        raise fail(f"the log of {job_name} could not be read to its end: {e}") from None
    if out is not None and partial is not None:
        partial.replace(out)  # the file appears whole or not at all
        make_console(stderr=True).print(
            f"Wrote {lines} lines from {len(streams)} stream(s) of {job_name} to {out}"
        )


def _local_logs(job_name: str, results: Path, out: Path | None) -> None:
    """Write a local job's kept output (every host's, in host order) to ``out`` or stdout."""
    from trainsweep import layout

    if "/" in job_name or job_name in ("", ".", ".."):
        raise fail(f"{job_name!r} is not a job name")
    folders = sorted(results.glob(f"*/{layout.job_output_dir(job_name)}"))
    if not folders:
        raise fail(
            f"no local job {job_name!r} under {results} (a local sweep keeps each job's output in "
            f"<sweep>/{layout.JOB_OUTPUT_DIR}/<job>/; give the folder it downloaded to with --results)"
        )
    hosts = sorted(folders[-1].glob("algo-*.txt"), key=lambda p: int(p.stem.rsplit("-", 1)[-1]))
    with _sink(out) as sink:
        for host in hosts:
            sink.write(host.read_bytes())
    if out is not None:
        make_console(stderr=True).print(f"Wrote the output of {job_name} ({len(hosts)} host(s)) to {out}")


@contextmanager
def _sink(path: Path | None) -> Iterator[BinaryIO]:
    """The open file ``path`` (its folder created), or stdout's bytes when ``path`` is None."""
    if path is None:
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    from trainsweep import atomicio

    with atomicio.open_atomic(path) as f:  # whole or absent
        yield f  # type: ignore[misc]
