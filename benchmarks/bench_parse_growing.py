"""ParseRun on a running job's log uploaded again and again as it grows: whole parses, resumed ones, and
resumed ones that write only what the live views read while the job runs.

    python benchmarks/bench_parse_growing.py [--mb 20] [--versions 40] [--container]

Generates a ``--mb`` MB cloud-ML log (bench_parse's generator: the epochs of every real cloud-ML log,
renumbered into one long run), or with ``--container`` a log as the trainsweep container writes it
(MLLOG events next to the legacy lines: a real one's epochs, from ``benchmarks/data/container-logs``,
repeated and renumbered), and uploads ``--versions`` growing versions of it (each cut at an
arbitrary byte, most inside a line) to ``sweeps/<id>/logs/`` of moto's in-process S3, calling
``lambdas/parse_run/handler.py`` on each version's notification, as a running job's uploads do, and
then once more as the state machine does when the job has ended. Three times, in the same process, the
modes' uploads interleaved (each version to one sweep, then the next):

* **whole**: uploaded without a checksum (an older container's uploads): every version is parsed from
  its first byte, and every artefact written for each;
* **resumed**: uploaded as the container uploads (``ChecksumAlgorithm=SHA256``): every version is read
  from where the last parse stopped (``sweeps/<id>/parse-state/<run>.state``), and every artefact
  written for each;
* **live**: as resumed, but each version gets only the run record the live views read; the seed
  outputs (``e<N>.json``, ``.summary``, ``.png``) are made by the end-of-job call. This is ParseRun as
  it is; the two modes above write every artefact per version
  (:func:`trainsweep.aws.runs.notified_artefacts` made to give them all), as it did before.

Prints, per mode, the log bytes ParseRun received (GetObject), the parse-state bytes it read and wrote,
the parser's own time (feeding the log's bytes, finishing the run, loading and dumping the state; not
S3's or the emulator's), the step-time plots it made, and the handler's total wall time (the end-of-job
call included, and moto's S3 in the same process), and checks that all modes leave the same artefacts.
``TRAINSWEEP_PURE_PYTHON=1`` reads the logs as ParseRun does in Lambda (no C scanner).
"""

from __future__ import annotations

import argparse
import inspect
import os
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

from bench_parse import generate_log  # noqa: E402

from tests.handlers.handler_helpers import jobs_document, planned_job, s3_event  # noqa: E402
from trainsweep import layout  # noqa: E402
from trainsweep.aws.config import BUCKET_ENV  # noqa: E402
from trainsweep.local.lambda_runner import LambdaContext  # noqa: E402

BUCKET = "bench-growing"
RUN = "bench-20260101-000000-p3-1-64-e1"


FIGURES = (
    "log_bytes_read",
    "log_gets",
    "state_bytes_read",
    "state_bytes_written",
    "parser_s",
    "plots_made",
    "handler_s",
    "late_upload_s",
)


class Meter:
    """Per mode, the bytes of the S3 calls the handler makes (log, parse state; from botocore's events)
    and the parser's own time (feeding bytes, finishing the run, loading and dumping a state: the
    function's parsing CPU, without S3 or the emulator). ``mode`` says whose figures a call adds to."""

    def __init__(self, s3: Any, modes: list[str]) -> None:
        from trainsweep.logs import parser, resume

        self.figures = {m: dict.fromkeys(FIGURES, 0.0) for m in modes}
        self.mode = modes[0]
        self._key = ""
        s3.meta.events.register("provide-client-params.s3.GetObject", self._asked)
        s3.meta.events.register("after-call.s3.GetObject", self._got)
        s3.meta.events.register("provide-client-params.s3.PutObject", self._put)
        self._saved: list[tuple[Any, str, Any]] = []
        timed: tuple[tuple[Any, str], ...] = (
            (parser.LogParse, "feed"),
            (parser.LogParse, "finish"),
            (resume, "load"),
            (resume, "dump"),
        )
        for owner, name in timed:
            real = getattr(owner, name)
            self._saved.append((owner, name, real))
            setattr(owner, name, self._timed(real))
        from trainsweep.plots import run as run_plots

        plot = run_plots.step_times_png
        self._saved.append((run_plots, "step_times_png", plot))
        run_plots.step_times_png = self._counted("plots_made", plot)  # type: ignore[assignment]

    def add(self, figure: str, amount: float) -> None:
        self.figures[self.mode][figure] += amount

    def _asked(self, params: dict[str, Any], **_: Any) -> None:
        self._key = params["Key"]

    def _got(self, parsed: dict[str, Any], **_: Any) -> None:
        n = int(parsed.get("ContentLength", 0))
        if self._key.endswith(layout.TRIGGER_SUFFIX_LOG):
            self.add("log_bytes_read", n)
            self.add("log_gets", 1)
        elif self._key.endswith(layout.PARSE_STATE_SUFFIX):
            self.add("state_bytes_read", n)

    def _put(self, params: dict[str, Any], **_: Any) -> None:
        if params["Key"].endswith(layout.PARSE_STATE_SUFFIX):
            self.add("state_bytes_written", len(params["Body"]))

    def _timed(self, real: Any) -> Any:
        def timed(*a: Any, **k: Any) -> Any:
            t = time.perf_counter()
            try:
                return real(*a, **k)
            finally:
                self.add("parser_s", time.perf_counter() - t)

        return timed

    def _counted(self, figure: str, real: Any) -> Any:
        def counted(*a: Any, **k: Any) -> Any:
            self.add(figure, 1)
            return real(*a, **k)

        return counted

    def remove(self) -> None:
        for owner, name, real in self._saved:
            setattr(owner, name, real)


def Context() -> LambdaContext:  # noqa: N802
    """A fresh invocation's context of a 1 GB ParseRun with its 5-minute timeout (local mode's own)."""
    function = SimpleNamespace(
        function_name="ParseRun",
        function_arn="arn:aws:lambda:us-east-1:123456789012:function:ParseRun",
        memory_size=1024,
    )
    return LambdaContext(function, timeout_s=300)


SHA256 = {"ChecksumAlgorithm": layout.RAW_LOG_CHECKSUM}
MODES: dict[str, tuple[dict[str, str], bool]] = {
    "whole": ({}, True),
    "resumed": (SHA256, True),
    "live": (SHA256, False),
}
"""Each mode's sweep gets its log uploaded without a checksum (parsed whole) or as the container does, and
every artefact written per version (True) or, while the job runs, only what the live views read."""


Figures = dict[str, dict[str, float]]
Artefacts = dict[str, dict[str, bytes]]


def run_modes(data: bytes, sizes: list[int]) -> tuple[Figures, Artefacts]:
    """Upload each version to every mode's sweep, one after the other (paired: the machine's load hits
    them alike), call the handler on each, then the end-of-job call; the figures and each mode's
    artefacts."""
    import boto3
    from moto import mock_aws

    from trainsweep.aws import runs
    from trainsweep.local.lambda_runner import load_handler

    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket=BUCKET)
        for mode in MODES:
            body = jobs_document([planned_job(_sweep(mode), RUN)])
            s3.put_object(Bucket=BUCKET, Key=layout.jobs_key(_sweep(mode)), Body=body)
        handler = load_handler(ROOT / "lambdas" / "parse_run" / "handler.py")
        module = inspect.getmodule(inspect.unwrap(handler))
        saved = module.boto3  # type: ignore[union-attr]
        module.boto3 = SimpleNamespace(client=lambda *_a, **_k: s3)  # type: ignore[union-attr]
        meter = Meter(s3, list(MODES))
        notified = runs.notified_artefacts
        try:
            for size in [*sizes, -1]:  # -1: the state machine's call once the job has ended
                for mode, (extra, every_artefact) in MODES.items():
                    meter.mode = mode
                    runs.notified_artefacts = _every_artefact if every_artefact else notified  # type: ignore[assignment]
                    t = time.perf_counter()
                    _deliver(s3, handler, mode, data[:size] if size >= 0 else None, extra)
                    took = time.perf_counter() - t
                    meter.add("handler_s", took)
                    if len(sizes) > 1 and size == sizes[-2]:  # the last version while the job runs
                        meter.add("late_upload_s", took)
        finally:
            runs.notified_artefacts = notified  # type: ignore[assignment]
            module.boto3 = saved  # type: ignore[union-attr]
            meter.remove()
        artefacts: Artefacts = {}
        for mode in MODES:
            prefix = layout.results_prefix(_sweep(mode))
            listed = s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", [])
            artefacts[mode] = {
                o["Key"][len(prefix) :]: s3.get_object(Bucket=BUCKET, Key=o["Key"])["Body"].read()
                for o in listed
            }
    return meter.figures, artefacts


def _every_artefact(_location: Any, run: Any) -> Any:
    from trainsweep.artefacts import iter_run_artefacts

    return iter_run_artefacts(run)


def _deliver(s3: Any, handler: Any, mode: str, version: bytes | None, extra: dict[str, str]) -> None:
    """Upload ``version`` and call the handler on its notification; None: the end-of-job call."""
    if version is None:
        outcome = {"training": {"TrainingJobStatus": "Completed"}}
        handler(
            {"sweep_id": _sweep(mode), "job": planned_job(_sweep(mode), RUN), "outcome": outcome}, Context()
        )
        return
    key = layout.log_key(_sweep(mode), RUN)
    s3.put_object(Bucket=BUCKET, Key=key, Body=version, **extra)
    handler(s3_event(key, BUCKET), Context())


def _sweep(mode: str) -> str:
    return f"bench{mode}-20260101-000000"


CONTAINER_LOG = HERE / "data" / "container-logs" / "mnist-cnn-cpu-a" / "logs" / "mnist-cnn-cpu-a-128.log"
_EPOCH_START = b'"key": "epoch_start"'


def container_log(megabytes: float) -> tuple[bytes, int]:
    """A long log as the trainsweep container writes it (MLLOG events next to the legacy lines): the
    header and end of a real one (``benchmarks/data/container-logs``) around its epochs, repeated and
    renumbered up to ``megabytes``."""
    lines = CONTAINER_LOG.read_bytes().splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if _EPOCH_START in line]
    end = next(i for i, line in enumerate(lines) if b'"key": "trainsweep.fit_s"' in line)
    head, tail = b"".join(lines[: starts[0]]), b"".join(lines[end:])
    blocks = [b"".join(lines[a:b]) for a, b in zip(starts, [*starts[1:], end], strict=True)]
    target, out, n = int(megabytes * 1e6), [head], 0
    size = len(head) + len(tail)
    while size < target:
        block = blocks[n % len(blocks)]
        first = n % len(blocks) + 1
        n += 1
        renumbered = block.replace(b'"epoch_num": %d}' % first, b'"epoch_num": %d}' % n)
        renumbered = renumbered.replace(b"Epoch %d/%d\n" % (first, len(blocks)), b"Epoch %d/K\n" % n)
        out.append(renumbered)
        size += len(renumbered)
    return b"".join(out).replace(b"/K\n", b"/%d\n" % n) + tail, n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=float, default=20.0, help="size of the whole log (MB)")
    ap.add_argument("--versions", type=int, default=40, help="uploads of the growing log")
    ap.add_argument("--container", action="store_true", help="a container log (MLLOG, legacy lines)")
    args = ap.parse_args()
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    os.environ[BUCKET_ENV] = BUCKET
    if args.container:
        data, epochs = container_log(args.mb)
        size = len(data)
    else:
        with tempfile.TemporaryDirectory(prefix="trainsweep-bench-") as tmp:
            path = Path(tmp) / "growing.log"
            size, epochs = generate_log(path, args.mb / 1000)
            data = path.read_bytes()
    step = size / args.versions
    sizes = [int(step * i) + 7 * i % 97 for i in range(1, args.versions)] + [size]  # cuts inside lines
    print(f"log: {size / 1e6:.1f} MB, {epochs} epochs, {len(sizes)} versions (every {step / 1e6:.2f} MB)")
    figures, out = run_modes(data, sizes)
    print(f"{'':24}" + "".join(f"{m:>14}" for m in MODES) + f"{'whole/live':>12}{'resumed/live':>14}")
    for name in FIGURES:
        fmt = "{:>14.2f}" if name.endswith("_s") else "{:>14,.0f}"
        row = [figures[m][name] for m in MODES]
        live = figures["live"][name]
        ratios = [f"{v / live:.1f}x" if live else "-" for v in row[:2]]
        print(f"{name:24}" + "".join(fmt.format(v) for v in row) + f"{ratios[0]:>12}{ratios[1]:>14}")
    same = out["whole"] == out["resumed"] == out["live"]
    print(f"same artefacts after the job's end: {same}")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
