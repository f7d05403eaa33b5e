"""ParseRun on a running job's growing log: each upload's new bytes are read, not the whole log again,
and the artefacts are those a parse of the whole version gives."""

from __future__ import annotations

import inspect
import json
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.handlers.handler_helpers import BUCKET, jobs_document, planned_job, put_planned_runs, s3_event
from trainsweep import layout
from trainsweep.artefacts import run_artefacts, run_record_bytes
from trainsweep.aws import runs
from trainsweep.aws import s3 as s3io
from trainsweep.aws.resume import finished_runs
from trainsweep.jobs import jobs_of_document
from trainsweep.logs import parse, resume
from trainsweep.training.upload import LogUploader

SWEEP = "demo-20260101-000000"
FCN_LOG = Path(
    "cloud-ML/seismic-fcn/experimental_results/2020-06-FCN-on-sagemaker/logs/result-p3-4-256-e1.txt"
)
MO833_LOG = Path("high-res-distributed/mo833-trabalho/experiment_results/c5x") / (
    "TEST_NODE-TEST_EXPERIMENT_ID-1625080072.599054.out"
)


class Reads:
    """Every GetObject the handler makes: (key, Range, bytes received), from botocore's events."""

    def __init__(self, s3: Any) -> None:
        self.calls: list[list[Any]] = []
        s3.meta.events.register("provide-client-params.s3.GetObject", self._asked)
        s3.meta.events.register("after-call.s3.GetObject", self._answered)

    def _asked(self, params: dict[str, Any], **_: Any) -> None:
        self.calls.append([params["Key"], params.get("Range"), None])

    def _answered(self, parsed: dict[str, Any], **_: Any) -> None:
        self.calls[-1][2] = parsed.get("ContentLength")

    def of(self, key: str) -> list[tuple[str | None, int]]:
        found = [(r, n) for k, r, n in self.calls if k == key]
        self.calls.clear()
        return found


def use_client(handler: Any, s3: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """ParseRun creates its S3 client with ``s3``'s event hooks: the test's own client."""
    module = inspect.getmodule(inspect.unwrap(handler("parse_run")))
    monkeypatch.setattr(module, "boto3", SimpleNamespace(client=lambda *_a, **_k: s3))


class Job:
    """A running job's log: written to a file and delivered as the container does (LogUploader)."""

    def __init__(
        self, s3: Any, handler: Any, tmp_path: Path, run: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        self.s3, self.run = s3, run
        self.key = layout.log_key(SWEEP, run)
        self.file = tmp_path / f"{run}.log"
        self.uploader = LogUploader(
            bucket=BUCKET, prefix=layout.logs_prefix(SWEEP), logs_dir=tmp_path, client_factory=lambda: s3
        )
        use_client(handler, s3, monkeypatch)
        self.reads = Reads(s3)

    def upload(self, data: bytes, handler: Any, context: Any) -> dict[str, Any]:
        self.file.write_bytes(data)
        assert self.uploader.flush() == 1
        return handler("parse_run")(s3_event(self.key), context)

    def artefacts(self) -> dict[str, bytes]:
        prefix = layout.results_prefix(SWEEP)
        listed = self.s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", [])
        return {
            o["Key"][len(prefix) :]: self.s3.get_object(Bucket=BUCKET, Key=o["Key"])["Body"].read()
            for o in listed
        }


def _whole(data: bytes, run: str, log_format: str | None = None) -> dict[str, bytes]:
    """What a version's notification leaves: the run record of a parse of the whole version, as a parse
    of a downloaded log gives it (the seed outputs wait for the job's end)."""
    record = layout.run_record_path(run)
    return {record: run_record_bytes(parse(data, name=run, log_format=log_format))}


def _versions(data: bytes, cut_inside: bytes) -> list[int]:
    """Sizes of growing versions: a few fractions of the log, one cut in the middle of a line that
    holds ``cut_inside``, and the whole log."""
    inside = data.index(cut_inside, len(data) // 2) + len(cut_inside) // 2
    sizes = {len(data) // 9, len(data) // 3, inside, inside + 1, (3 * len(data)) // 4, len(data)}
    return sorted(sizes)


@pytest.mark.parametrize(
    ("fixture", "run", "cut_inside"),
    [
        (FCN_LOG, f"{SWEEP}-p3-4-256-e1", b"step training time: "),
        (MO833_LOG, f"{SWEEP}-c5-1-64-e0", b",It. time,"),
    ],
)
def test_each_upload_reads_only_its_new_bytes_and_gives_the_whole_parse(
    s3, handler, context, real_data, tmp_path, monkeypatch, fixture, run, cut_inside
):
    data = (real_data / fixture).read_bytes()
    put_planned_runs(s3, SWEEP, run)
    job = Job(s3, handler, tmp_path, run, monkeypatch)
    read_to = 0
    for size in _versions(data, cut_inside):
        job.upload(data[:size], handler, context)
        reads = job.reads.of(job.key)
        assert job.artefacts() == _whole(data[:size], run), f"version of {size} bytes"
        # one ranged GET per upload: the new bytes, and the few before them that identify the log
        [(asked, got)] = reads
        assert asked == f"bytes={max(0, read_to - resume.TAIL)}-"
        assert got <= size - read_to + resume.TAIL
        read_to = size


def test_the_parse_resumes_at_a_line_cut_in_the_middle_of_its_number(
    s3, handler, context, real_data, tmp_path, monkeypatch
):
    run = f"{SWEEP}-p3-4-256-e1"
    data = (real_data / FCN_LOG).read_bytes()
    put_planned_runs(s3, SWEEP, run)
    job = Job(s3, handler, tmp_path, run, monkeypatch)
    cut = data.index(b"step training time: 0.", len(data) // 2) + len(b"step training time: 0.")
    job.upload(data[:cut], handler, context)
    job.upload(data[: cut + 3], handler, context)  # still inside the same number
    job.upload(data, handler, context)
    assert job.artefacts() == _whole(data, run)


def _bytes_read_of_last_upload(job: Job) -> list[int]:
    return [n for _, n in job.reads.of(job.key)]


@pytest.fixture
def fcn_job(s3, handler, context, real_data, tmp_path, monkeypatch) -> tuple[Job, bytes]:
    """A job whose log's first half is parsed and its state kept."""
    run = f"{SWEEP}-p3-4-256-e1"
    data = (real_data / FCN_LOG).read_bytes()
    put_planned_runs(s3, SWEEP, run)
    job = Job(s3, handler, tmp_path, run, monkeypatch)
    job.upload(data[: len(data) // 2], handler, context)
    job.reads.of(job.key)
    return job, data


def test_a_missing_state_reads_the_log_whole(s3, handler, context, fcn_job):
    job, data = fcn_job
    s3.delete_object(Bucket=BUCKET, Key=layout.parse_state_key(SWEEP, job.run))
    job.upload(data, handler, context)
    assert _bytes_read_of_last_upload(job) == [len(data)]
    assert job.artefacts() == _whole(data, job.run)


def test_a_log_that_shrank_is_read_whole(s3, handler, context, fcn_job):
    """A restarted job (a spot interruption) starts a new, shorter log under the same name."""
    job, data = fcn_job
    restarted = data[: len(data) // 5]
    job.upload(restarted, handler, context)
    assert _bytes_read_of_last_upload(job) == [len(restarted)]
    assert job.artefacts() == _whole(restarted, job.run)


def test_a_log_replaced_by_a_longer_other_log_is_read_whole(s3, handler, context, fcn_job):
    job, data = fcn_job
    other = data.replace(b"step training time: 0.", b"step training time: 1.")
    job.upload(other, handler, context)
    reads = _bytes_read_of_last_upload(job)
    assert reads[-1] == len(other)  # after the bytes before the offset did not match
    assert job.artefacts() == _whole(other, job.run)


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda h: h | {"parser": "0" * 16}, id="another-parser-version"),
        pytest.param(lambda h: h | {"format": resume.STATE_FORMAT + 1}, id="another-state-format"),
        pytest.param(lambda h: h | {"run_name": "someone-else"}, id="another-run"),
    ],
)
def test_a_state_of_another_version_or_run_is_not_used(s3, handler, context, fcn_job, damage):
    job, data = fcn_job
    key = layout.parse_state_key(SWEEP, job.run)
    line, _, blob = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read().partition(b"\n")
    header = damage(json.loads(line))
    s3.put_object(Bucket=BUCKET, Key=key, Body=json.dumps(header).encode() + b"\n" + blob)
    job.upload(data, handler, context)
    assert _bytes_read_of_last_upload(job) == [len(data)]
    assert job.artefacts() == _whole(data, job.run)


def test_a_state_that_names_code_is_refused_not_run(s3, handler, context, fcn_job, tmp_path):
    import pickle

    class Boom:
        def __reduce__(self) -> tuple[Any, ...]:
            return (Path.touch, (tmp_path / "ran",))

    job, data = fcn_job
    key = layout.parse_state_key(SWEEP, job.run)
    line = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read().partition(b"\n")[0]
    s3.put_object(Bucket=BUCKET, Key=key, Body=line + b"\n" + pickle.dumps(Boom()))
    job.upload(data, handler, context)
    assert not (tmp_path / "ran").exists()
    assert _bytes_read_of_last_upload(job) == [len(data)]
    assert job.artefacts() == _whole(data, job.run)


def test_a_log_without_its_sha256_in_s3_is_parsed_whole_and_keeps_no_state(
    s3, handler, context, real_data, monkeypatch
):
    """An older container's upload, or a CloudWatch stream ExportLog copied: no checksum to rely on."""
    run = f"{SWEEP}-p3-4-256-e1"
    data = (real_data / FCN_LOG).read_bytes()
    put_planned_runs(s3, SWEEP, run)
    use_client(handler, s3, monkeypatch)
    s3.put_object(Bucket=BUCKET, Key=layout.log_key(SWEEP, run), Body=data)
    handler("parse_run")(s3_event(layout.log_key(SWEEP, run)), context)
    state = s3.list_objects_v2(Bucket=BUCKET, Prefix=layout.parse_state_key(SWEEP, run))
    assert state.get("KeyCount") == 0
    record = layout.results_key(SWEEP, layout.run_record_path(run))
    got = json.loads(s3.get_object(Bucket=BUCKET, Key=record)["Body"].read())
    assert got == json.loads(_whole(data, run)[layout.run_record_path(run)])


def test_the_finished_job_resumes_from_the_last_upload(s3, handler, context, fcn_job):
    """The state machine's per-job call parses the final log from the state the uploads left."""
    job, data = fcn_job
    job.file.write_bytes(data)
    job.uploader.flush()
    job_doc = planned_job(SWEEP, job.run)
    cells = handler("parse_run")(
        {"sweep_id": SWEEP, "job": job_doc, "outcome": {"training": {"TrainingJobStatus": "Completed"}}},
        context,
    )
    assert [c["status"] for c in cells] == ["completed"]
    assert _bytes_read_of_last_upload(job) == [len(data) - len(data) // 2 + resume.TAIL]
    assert job.artefacts() == run_artefacts(parse(data, name=job.run))


def test_a_job_with_its_own_log_format_resumes_with_that_pattern(s3, handler, context, tmp_path, monkeypatch):
    from tests.handlers.handler_helpers import jobs_document

    pattern = r"^epoch (?P<epoch>\d+) step (?P<step>\d+): (?P<step_s>[0-9.]+) s$"
    run = f"{SWEEP}-p3-1-64-e0"
    s3.put_object(
        Bucket=BUCKET,
        Key=layout.jobs_key(SWEEP),
        Body=jobs_document([planned_job(SWEEP, run, log_format=pattern)]),
    )
    data = b"".join(f"epoch {e} step {s}: 0.{s}25 s\n".encode() for e in (1, 2, 3) for s in range(1, 60))
    job = Job(s3, handler, tmp_path, run, monkeypatch)
    for size in (len(data) // 3, len(data) // 2 + 5, len(data)):
        job.upload(data[:size], handler, context)
        [(asked, _)] = job.reads.of(job.key)
        assert job.artefacts() == _whole(data[:size], run, pattern)
    assert asked != "bytes=0-"


# ---- what each upload writes: the live views' artefacts while the job runs, the rest at its end ---------


class Builds:
    """How often the seed outputs are made: the plot, the seed JSON and the summary (their makers)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import trainsweep.plots.run as run_plots
        import trainsweep.summary as summary

        self.made: Counter[str] = Counter()
        makers = ((run_plots, "step_times_png"), (summary, "iter_seed_json"), (summary, "iter_seed_summary"))
        for owner, name in makers:
            monkeypatch.setattr(owner, name, self._counted(name, getattr(owner, name)))

    def _counted(self, name: str, real: Any) -> Any:
        def counted(*a: Any, **k: Any) -> Any:
            self.made[name] += 1
            return real(*a, **k)

        return counted

    def take(self) -> dict[str, int]:
        made = dict(self.made)
        self.made.clear()
        return made


CONTAINER_LOG = Path(__file__).resolve().parents[2] / "benchmarks/data/container-logs/mnist-cnn-cpu-a/logs"
LOGS = [
    pytest.param(FCN_LOG, b"step training time: 0.", id="cloud-ML"),
    pytest.param(CONTAINER_LOG / "mnist-cnn-cpu-a-128.log", b'"key": "trainsweep.step"', id="container"),
]


def _log(real_data: Path, path: Path) -> bytes:
    return (real_data / path).read_bytes()  # an absolute path stays itself


def _running_versions(data: bytes, cut_inside: bytes, n: int) -> list[int]:
    """``n`` growing versions of a log, each cut inside a line that holds ``cut_inside``: a job still
    writing it."""
    step = len(data) // (n + 1)
    return [data.index(cut_inside, step * i) + len(cut_inside) // 2 for i in range(1, n + 1)]


def _finished(handler: Any, context: Any, job: Job) -> list[dict[str, Any]]:
    event = {"sweep_id": SWEEP, "job": planned_job(SWEEP, job.run), "outcome": {"training": {}}}
    return handler("parse_run")(event, context)


@pytest.mark.parametrize(("fixture", "cut_inside"), LOGS)
def test_a_running_jobs_uploads_write_the_run_record_the_live_views_read_and_no_seed_output(
    s3, handler, context, real_data, tmp_path, monkeypatch, fixture, cut_inside
):
    run = f"{SWEEP}-p3-4-256-e1"
    data = _log(real_data, fixture)
    put_planned_runs(s3, SWEEP, run)
    job = Job(s3, handler, tmp_path, run, monkeypatch)
    versions = [*_running_versions(data, cut_inside, 8), len(data)]  # and the upload at exit
    expected = [run_record_bytes(parse(data[:size], name=run)) for size in versions]
    builds = Builds(monkeypatch)
    record = layout.run_record_path(run)
    for size, want in zip(versions, expected, strict=True):
        written = job.upload(data[:size], handler, context)["written"]
        assert written == [layout.results_key(SWEEP, record)]
        # `trainsweep status` lists the records, a folder downloaded mid-run is reported from them:
        # the same bytes as a parse of the whole version writes
        assert job.artefacts() == {record: want}, f"version of {size} bytes"
    assert builds.take() == {}


@pytest.mark.parametrize(("fixture", "cut_inside"), LOGS)
def test_the_seed_outputs_are_made_once_when_the_job_ends_and_equal_a_whole_parse(
    s3, handler, context, real_data, tmp_path, monkeypatch, fixture, cut_inside
):
    run = f"{SWEEP}-p3-4-256-e1"
    data = _log(real_data, fixture)
    put_planned_runs(s3, SWEEP, run)
    job = Job(s3, handler, tmp_path, run, monkeypatch)
    whole = run_artefacts(parse(data, name=run))
    builds = Builds(monkeypatch)
    for size in [*_running_versions(data, cut_inside, 8), len(data)]:
        job.upload(data[:size], handler, context)
    assert builds.take() == {}
    [cell] = _finished(handler, context, job)
    assert cell["status"] == "completed"
    assert builds.take() == {"step_times_png": 1, "iter_seed_json": 1, "iter_seed_summary": 1}
    assert job.artefacts() == whole
    # a late notification of the last version rewrites its record (the same bytes), and keeps the rest
    handler("parse_run")(s3_event(job.key), context)
    assert builds.take() == {}
    assert job.artefacts() == whole


def test_a_job_that_ended_mid_epoch_gets_its_seed_outputs_from_the_state_machines_call(
    s3, handler, context, real_data, tmp_path, monkeypatch
):
    """A killed job's log never ends: the state machine's per-job call writes the last version's."""
    run = f"{SWEEP}-p3-4-256-e1"
    data = (real_data / FCN_LOG).read_bytes()
    put_planned_runs(s3, SWEEP, run)
    job = Job(s3, handler, tmp_path, run, monkeypatch)
    versions = _running_versions(data, b"step training time: 0.", 6)
    whole = run_artefacts(parse(data[: versions[-1]], name=run))
    builds = Builds(monkeypatch)
    for size in versions:
        job.upload(data[:size], handler, context)
    assert builds.take() == {}
    _finished(handler, context, job)
    assert builds.take() == {"step_times_png": 1, "iter_seed_json": 1, "iter_seed_summary": 1}
    assert job.artefacts() == whole


def test_a_resume_writes_the_seed_outputs_of_a_run_whose_jobs_end_was_never_recorded(
    s3, handler, context, real_data, tmp_path, monkeypatch
):
    """Stopped after the job's last upload, before the state machine recorded its end: the run has its
    record and no seed outputs; the resume that keeps it writes them, as the end-of-job call would."""
    run = f"{SWEEP}-p3-4-256-e1"
    data = (real_data / FCN_LOG).read_bytes()
    planned = planned_job(SWEEP, run, instance_type="ml.p3.8xlarge", vmtype="p3-4", repetition=1)
    s3.put_object(Bucket=BUCKET, Key=layout.jobs_key(SWEEP), Body=jobs_document([planned]))
    job = Job(s3, handler, tmp_path, run, monkeypatch)
    for size in [*_running_versions(data, b"step training time: 0.", 3), len(data)]:
        job.upload(data[:size], handler, context)
    assert set(job.artefacts()) == {layout.run_record_path(run)}
    jobs = jobs_of_document(s3io.get_json(s3, BUCKET, layout.jobs_key(SWEEP)))

    finished = finished_runs(s3, BUCKET, SWEEP, [run])
    assert runs.complete_runs(s3, BUCKET, SWEEP, jobs, finished) == [run]

    assert job.artefacts() == run_artefacts(parse(data, name=run))
    builds = Builds(monkeypatch)  # a second resume finds the seed outputs: nothing is parsed again
    assert runs.complete_runs(s3, BUCKET, SWEEP, jobs, finished) == []
    assert builds.take() == {}
