"""The download driver: a sweep's results and logs from the stack's bucket to a folder, its jobs' models and
checkpoints only when asked, the size said before the transfer (``trainsweep download``, the end of
``trainsweep run``, ``trainsweep.download``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainsweep.sweeps.result import DEFAULT_RESULTS_DIR, SweepEvents


def size_text(n: int) -> str:
    """Bytes for people: ``812 B``, ``3.4 KiB``, ``7.1 GiB``."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def _files(n: int) -> str:
    return f"{n} file{'' if n == 1 else 's'}"


def transfer_line(objects: Any, models: bool) -> str:
    """What a download is about to fetch, with sizes, and what it leaves in S3."""
    fetched = objects.files + (objects.models if models else [])
    line = f"Downloading {_files(len(fetched))} ({size_text(objects.size(fetched))})"
    if not objects.models:
        return line
    models_part = f"{_files(len(objects.models))}, {size_text(objects.size(objects.models))}"
    if models:
        return f"{line}, models and checkpoints ({models_part}) included"
    return f"{line}; models and checkpoints ({models_part}) stay in S3: --models fetches them"


def fetch(
    s3: Any,
    bucket: str,
    sweep_id: str,
    dest: Path,
    *,
    models: bool = False,
    events: SweepEvents | None = None,
) -> list[Path]:
    """List the sweep, say what it will fetch and its size (``events.say``), then download it to ``dest``.

    Raises:
        SweepNotFoundError: the bucket holds nothing of the sweep.
    """
    from trainsweep.aws import sweeps

    objects = sweeps.list_sweep(s3, bucket, sweep_id)
    (events or SweepEvents()).say(transfer_line(objects, models))
    return sweeps.download_sweep(s3, bucket, sweep_id, dest, models=models, objects=objects)


def download(
    sweep_id: str,
    *,
    stack: str,
    session: Any = None,
    profile: str | None = None,
    region: str | None = None,
    to: Path | None = None,
    models: bool = False,
    events: SweepEvents | None = None,
) -> list[Path]:
    """Download a sweep of the deployed stack to ``to`` (default ``trainsweep-results/<sweep-id>/``);
    returns the files written. ``session``: a boto3 session, else one for ``profile`` and ``region``.

    Raises:
        SpecError: ``sweep_id`` does not name one folder.
        TrainsweepError: no such stack, or no such sweep in its bucket.
    """
    from trainsweep.aws.region import open_session
    from trainsweep.sweeps.cloud import stack_resources
    from trainsweep.sweeps.status import check_folder_id

    check_folder_id(sweep_id)  # it names the folder and the S3 prefix
    session = session or open_session(profile, region)
    bucket, _ = stack_resources(session, stack)
    dest = to or DEFAULT_RESULTS_DIR / sweep_id
    return fetch(session.client("s3"), bucket, sweep_id, dest, models=models, events=events)
