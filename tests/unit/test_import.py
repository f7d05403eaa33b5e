"""`trainsweep.importer.import_dir`: discovery, per-file isolation, cross-file checks, quality.json."""

from __future__ import annotations

import json
import os
import sys
import types
from pathlib import Path

import pytest

from trainsweep.importer import ImportSourceError, import_dir

FCN = "cloud-ML/seismic-fcn/experimental_results/2020-06-FCN-on-sagemaker"
MNIST = "cloud-ML/cnn-mnist/experimental-results/2020-07-MNIST-on-sagemaker"
H7398 = "cloud-ML/_history/7398e0c/cnn-mnist/experimental-results/2020-07-MNIST-on-sagemaker"
H8078 = "cloud-ML/_history/8078c07/cnn-mnist/experimental-results/2020-07-MNIST-on-sagemaker"


def make_log(epochs: int = 2, steps: int = 5, base: float = 0.1, total: float | None = None) -> bytes:
    """A small cloud-ML-style log (Python 3 Keras callback prints)."""
    lines = ["Initialization time 0.5", "Train on 1280 samples, validate on 100 samples"]
    t = 1_600_000_000.0
    for e in range(1, epochs + 1):
        lines += [f"Epoch {e}/{epochs}", f"Real time: {t}"]
        for s in range(1, steps + 1):
            value = 2.0 if (e, s) == (1, 1) else base + 0.001 * s
            lines.append(f"{s} step training time: {value:.6f}s")
        t += 3.0
        lines += ["Validation time: 0.200000s", f"Real time: {t}", f"Epoch time: {3.0 if e == 1 else 0.9}s"]
    lines += [f"Duracao do treinamento: {total if total is not None else 3.0 + 0.9 * (epochs - 1) + 0.5}"]
    lines += ["Training complete."]
    return ("\n".join(lines) + "\n").encode()


def outputs(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def quality(out: Path) -> dict:
    return json.loads((out / "quality.json").read_text())


def by_path(q: dict) -> dict[str, dict]:
    return {f["path"]: f for f in q["files"]}


def codes(entry: dict) -> set[str]:
    return {p["code"] for p in entry["problems"]}


# ---- a folder of logs -------------------------------------------------------------------------------


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    (src / "result-p3-1-256-e0.txt").write_bytes(make_log())
    (src / "result-p3-1-256-e1.txt").write_bytes(make_log(base=0.2))
    (src / "result-p3-1-512-e0.txt").write_bytes(make_log(steps=3, base=0.3))
    return src


def test_a_flat_folder_of_seed_logs_gives_the_seed_layout(logs: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = import_dir(logs, out, workers=1)
    assert result.processed == 3
    files = outputs(out)
    for cell in ("p3-1/256/e0", "p3-1/256/e1", "p3-1/512/e0"):
        for ext in ("json", "summary", "png"):
            assert f"execution-times/{cell}.{ext}" in files
    assert "runs/result-p3-1-512-e0.json" in files
    seed = json.loads(files["execution-times/p3-1/512/e0.json"])
    assert seed["batch_size"] == "512"
    assert list(seed["epochs"]["2"]["steps"].values()) == [0.301, 0.302, 0.303]
    assert quality(out)["summary"]["files"] == 3


@pytest.mark.slow
def test_importing_twice_writes_the_same_bytes(logs: Path, tmp_path: Path) -> None:
    import_dir(logs, tmp_path / "a", workers=1)
    import_dir(logs, tmp_path / "b", workers=1)
    assert outputs(tmp_path / "a") == outputs(tmp_path / "b")


@pytest.mark.slow
def test_the_process_pool_gives_the_same_results_as_one_process(logs: Path, tmp_path: Path) -> None:
    for i in range(3):
        (logs / f"result-p2-1-256-e{i}.txt").write_bytes(make_log(base=0.4 + i / 10))
    import_dir(logs, tmp_path / "serial", workers=1)
    import_dir(logs, tmp_path / "pool", workers=2)
    assert outputs(tmp_path / "serial") == outputs(tmp_path / "pool")


def test_progress_is_reported_after_every_file(logs: Path, tmp_path: Path) -> None:
    calls: list[tuple[int, int, str]] = []
    import_dir(
        logs, tmp_path / "out", workers=1, report=False, progress=lambda d, t, p: calls.append((d, t, p))
    )
    assert [c[:2] for c in calls] == [(1, 3), (2, 3), (3, 3)]
    assert {c[2] for c in calls} == {
        "result-p3-1-256-e0.txt",
        "result-p3-1-256-e1.txt",
        "result-p3-1-512-e0.txt",
    }


def test_bad_files_are_reported_and_do_not_affect_the_others(logs: Path, tmp_path: Path) -> None:
    import_dir(logs, tmp_path / "clean", workers=1, report=False)
    (logs / "result-p3-1-1024-e0.txt").write_bytes(b"")
    (logs / "result-p3-1-1024-e1.txt").write_bytes(bytes(range(256)) * 64)
    (logs / "result-p3-1-1024-e2.txt").write_bytes(b"Downloading data from https://example.com/mnist.npz\n")
    (logs / "job.log").write_bytes(b"\xff\xfe garbage \x00\x01\n" * 10)
    out = tmp_path / "out"
    result = import_dir(logs, out, workers=1, report=False)
    assert result.processed == 7
    q = by_path(quality(out))
    for bad in ("result-p3-1-1024-e0.txt", "result-p3-1-1024-e1.txt", "result-p3-1-1024-e2.txt", "job.log"):
        assert q[bad]["problems"], bad
        assert q[bad]["steps"] == 0
        assert not any(path.startswith("execution-times/p3-1/1024/") for path in q[bad]["outputs"])
        assert f"runs/{Path(bad).stem}.json" in q[bad]["outputs"]
    per_run = {
        k: v for k, v in outputs(tmp_path / "clean").items() if k.startswith(("execution-times/", "runs/"))
    }
    now = outputs(out)
    assert {k: now[k] for k in per_run} == per_run


def test_a_crash_while_processing_one_file_is_reported_and_the_import_goes_on(
    logs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import trainsweep.artefacts

    real = trainsweep.artefacts.iter_run_artefacts

    def flaky(run):
        if run.name == "result-p3-1-256-e1":
            raise RuntimeError("renderer bug")
        return real(run)

    monkeypatch.setattr(trainsweep.artefacts, "iter_run_artefacts", flaky)
    result = import_dir(logs, tmp_path / "out", workers=1, report=False)
    q = by_path(result.quality)
    assert q["result-p3-1-256-e1.txt"]["status"] == "error"
    assert [p["code"] for p in q["result-p3-1-256-e1.txt"]["problems"]] == ["import.crashed"]
    assert "renderer bug" in q["result-p3-1-256-e1.txt"]["problems"][0]["message"]
    assert (tmp_path / "out/execution-times/p3-1/512/e0.json").is_file()
    assert result.quality["summary"]["by_status"] == {"complete": 2, "error": 1}


def test_files_that_are_not_training_logs_are_skipped_and_listed(logs: Path, tmp_path: Path) -> None:
    (logs / "notes.txt").write_text("remember to run the p2 instances again\n")
    (logs / "e0.json").write_text("{}")
    (logs / "README.md").write_text("# logs\n")
    result = import_dir(logs, tmp_path / "out", workers=1, report=False)
    assert result.processed == 3
    assert result.skipped == [{"path": "notes.txt", "reason": "no training-log content"}]


def test_a_log_with_an_unusual_name_is_found_by_its_content(logs: Path, tmp_path: Path) -> None:
    (logs / "sub").mkdir()
    (logs / "sub" / "run-of-monday.txt").write_bytes(make_log())
    result = import_dir(logs, tmp_path / "out", workers=1, report=False)
    entry = by_path(result.quality)["sub/run-of-monday.txt"]
    assert entry["results_root"] == "sub"
    assert entry["outputs"] == ["sub/runs/run-of-monday.json"]  # no VMTYPE/BS/N: the record only


def test_byte_identical_logs_under_different_names_are_flagged(logs: Path, tmp_path: Path) -> None:
    (logs / "result-p2-8-256-e0.txt").write_bytes((logs / "result-p3-1-256-e0.txt").read_bytes())
    q = quality(import_dir(logs, tmp_path / "out", workers=1, report=False).out)
    dup = [d for d in q["duplicates"] if d["kind"] == "identical_bytes"]
    assert [sorted(d["paths"]) for d in dup] == [["result-p2-8-256-e0.txt", "result-p3-1-256-e0.txt"]]
    assert "import.duplicate_log" in codes(by_path(q)["result-p2-8-256-e0.txt"])
    assert "import.duplicate_log" not in codes(by_path(q)["result-p3-1-512-e0.txt"])


def test_the_same_timings_with_different_bytes_are_flagged_as_duplicated_content(
    logs: Path, tmp_path: Path
) -> None:
    (logs / "result-p3-1-256-e2.txt").write_bytes(b"Using TensorFlow backend.\n" + make_log())
    q = quality(import_dir(logs, tmp_path / "out", workers=1, report=False).out)
    assert [sorted(d["paths"]) for d in q["duplicates"] if d["kind"] == "identical_timings"] == [
        ["result-p3-1-256-e0.txt", "result-p3-1-256-e2.txt"]
    ]
    assert "import.duplicate_content" in codes(by_path(q)["result-p3-1-256-e2.txt"])


def test_experiments_that_share_log_names_do_not_overwrite_each_other(tmp_path: Path) -> None:
    src = tmp_path / "src"
    for exp, base in (("fcn", 0.1), ("mnist", 0.5)):
        (src / exp / "logs").mkdir(parents=True)
        (src / exp / "logs" / "result-p2-1-256-e1.txt").write_bytes(make_log(base=base))
    out = tmp_path / "out"
    import_dir(src, out, workers=1, report=False)
    fcn = json.loads((out / "fcn/execution-times/p2-1/256/e1.json").read_text())
    mnist = json.loads((out / "mnist/execution-times/p2-1/256/e1.json").read_text())
    assert fcn["epochs"]["2"]["steps"]["1"] == 0.101
    assert mnist["epochs"]["2"]["steps"]["1"] == 0.501


def test_two_logs_for_one_cell_keep_the_first_and_report_the_second(logs: Path, tmp_path: Path) -> None:
    (logs / "result-p3-1-256-e0.out").write_bytes(make_log(base=0.7))  # sorts before the .txt
    q = by_path(quality(import_dir(logs, tmp_path / "out", workers=1, report=False).out))
    first, second = q["result-p3-1-256-e0.out"], q["result-p3-1-256-e0.txt"]
    assert (first["run_name"], second["run_name"]) == ("result-p3-1-256-e0.out", "result-p3-1-256-e0.txt")
    assert "import.output_collision" not in codes(first)
    assert "import.output_collision" in codes(second)
    assert "runs/result-p3-1-256-e0.txt.json" in second["outputs"]
    seed = json.loads((tmp_path / "out/execution-times/p3-1/256/e0.json").read_text())
    assert seed["epochs"]["2"]["steps"]["1"] == 0.701


def test_ec2_logs_take_their_vmtype_from_the_instance_type_folder(tmp_path: Path) -> None:
    src = tmp_path / "src" / "p3.2xlarge"
    src.mkdir(parents=True)
    (src / "result-1-256-e1.out").write_bytes(make_log())
    out = tmp_path / "out"
    import_dir(tmp_path / "src", out, workers=1, report=False)
    assert (out / "p3.2xlarge/execution-times/p3-1/256/e1.json").is_file()


def test_the_output_folder_inside_the_source_is_not_imported(logs: Path) -> None:
    import_dir(logs, logs / "results", workers=1, report=False)
    result = import_dir(logs, logs / "results", workers=1, report=False)
    assert result.processed == 3


def test_a_missing_source_folder_raises_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ImportSourceError, match="does not exist"):
        import_dir(tmp_path / "nope", tmp_path / "out")


# ---- the sweep artefacts of the analysis engineer -------------------------------------------------


def _fake_report(monkeypatch: pytest.MonkeyPatch, fn) -> None:
    module = types.ModuleType("trainsweep.report")
    module.sweep_artefacts = fn  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "trainsweep.report", module)


def test_sweep_artefacts_are_written_per_results_root(
    logs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = []

    def sweep_artefacts(runs, *, spec=None, jobs=None, quality=None):
        seen.append(([r.name for r in runs], [f["path"] for f in quality["files"]]))
        return {"sweep.csv": b"name\n" + b"".join(r.name.encode() + b"\n" for r in runs)}

    _fake_report(monkeypatch, sweep_artefacts)
    out = tmp_path / "out"
    import_dir(logs, out, workers=1)
    assert (out / "sweep.csv").read_bytes().splitlines()[1:] == [
        b"result-p3-1-256-e0",
        b"result-p3-1-256-e1",
        b"result-p3-1-512-e0",
    ]
    assert seen[0][1] == ["result-p3-1-256-e0.txt", "result-p3-1-256-e1.txt", "result-p3-1-512-e0.txt"]


def test_a_failing_sweep_report_keeps_the_per_run_results(
    logs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def sweep_artefacts(runs, **kwargs):
        raise ValueError("no prices")

    _fake_report(monkeypatch, sweep_artefacts)
    out = tmp_path / "out"
    result = import_dir(logs, out, workers=1)
    assert (out / "execution-times/p3-1/256/e0.json").is_file()
    assert any("no prices" in n for n in result.quality["notes"])


def test_sweep_artefacts_of_several_roots_are_made_in_the_worker_processes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def sweep_artefacts(runs, *, spec=None, jobs=None, quality=None):
        return {"sweep.csv": f"{len(runs)} runs in process {os.getpid()}\n".encode()}

    _fake_report(monkeypatch, sweep_artefacts)  # forked workers inherit it
    src = tmp_path / "src"
    for exp in ("a", "b"):
        (src / exp / "logs").mkdir(parents=True)
        for n in range(3):
            (src / exp / "logs" / f"result-p3-1-256-e{n}.txt").write_bytes(make_log(base=0.1 * (n + 1)))
    out = tmp_path / "out"
    import_dir(src, out, workers=2)
    texts = [(out / exp / "sweep.csv").read_text() for exp in ("a", "b")]
    assert all(t.startswith("3 runs in process ") for t in texts)
    assert not any(t.endswith(f"process {os.getpid()}\n") for t in texts)


def test_the_sweep_report_can_be_left_out(logs: Path, tmp_path: Path) -> None:
    result = import_dir(logs, tmp_path / "out", workers=1, report=False)
    assert not (tmp_path / "out" / "report.html").exists()
    assert (tmp_path / "out" / "execution-times/p3-1/256/e0.json").is_file()
    assert any("not requested" in n for n in result.quality["notes"])


# ---- the real data --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_import(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    real = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "real-data"
    out = tmp_path_factory.mktemp("real-import")
    result = import_dir(real, out, workers=2)
    return out, result.quality


@pytest.mark.slow
def test_every_real_log_imports_without_a_crash(real_import: tuple[Path, dict]) -> None:
    _, q = real_import
    assert q["summary"]["files"] == 133  # 132 log files and the log inside the ResNet model.tar.gz
    assert q["skipped"] == []
    crashed = [f["path"] for f in q["files"] if f["status"] == "error"]
    assert crashed == []


@pytest.mark.slow
def test_real_import_writes_a_sweep_report_per_experiment(real_import: tuple[Path, dict]) -> None:
    out, q = real_import
    assert q["notes"] == []
    for root in (FCN, MNIST, H7398, H8078):
        assert (out / root / "report.html").is_file(), root
        assert (out / root / "sweep.csv").is_file(), root


@pytest.mark.slow
def test_real_import_mirrors_the_reference_layout(real_import: tuple[Path, dict], real_data: Path) -> None:
    out, _ = real_import
    for ref in sorted((real_data / FCN / "execution-times").rglob("e*.json")):
        ours = out / ref.relative_to(real_data)
        theirs = json.loads(ref.read_text())
        assert json.loads(ours.read_text())["epochs"]["3"]["steps"] == theirs["epochs"]["3"]["steps"]


@pytest.mark.slow
def test_real_import_flags_the_byte_identical_copies(real_import: tuple[Path, dict]) -> None:
    _, q = real_import
    groups = sorted(sorted(d["paths"]) for d in q["duplicates"] if d["kind"] == "identical_bytes")
    resnet_output = "cloud-ML/resnet50-cifar/experimental-results/2020-08-CIFAR-on-sagemaker/output"
    assert groups == [
        [f"{MNIST}/logs/result-p3-1-256-e1.txt", f"{MNIST}/logs/result-p3-1-256-e2.txt"],
        [f"{MNIST}/logs/result-p3-1-512-e1.txt", f"{MNIST}/logs/result-p3-1-512-e2.txt"],
        [f"{resnet_output}/model.tar.gz.extracted/log.txt", f"{resnet_output}/model.tar.gz/log.txt"],
        [f"{FCN}/logs/result-p2-1-256-e2.txt", f"{FCN}/logs/result-p2-8-256-e2.txt"],
    ]


@pytest.mark.slow
def test_real_import_flags_the_failed_job(real_import: tuple[Path, dict]) -> None:
    _, q = real_import
    entry = by_path(q)[f"{H7398}/logs/result-g4dn-4-256-e1.txt"]
    assert entry["status"] in ("failed", "empty")
    assert any(p["severity"] == "error" for p in entry["problems"])
    assert entry["outputs"] == [f"{H7398}/runs/result-g4dn-4-256-e1.json"]


@pytest.mark.slow
def test_real_import_flags_the_header_that_contradicts_the_name(real_import: tuple[Path, dict]) -> None:
    _, q = real_import
    entry = by_path(q)[f"{H7398}/logs/result-g4dn-1-2048-e1.txt"]
    messages = " ".join(p["message"] for p in entry["problems"])
    assert "header-contradicts-name" in codes(entry)
    assert "2048" in messages and "1024" in messages, entry["problems"]


@pytest.mark.slow
def test_real_import_flags_the_log_that_begins_mid_epoch(real_import: tuple[Path, dict]) -> None:
    _, q = real_import
    entry = by_path(q)[f"{H8078}/logs/result-p2-1-256-e1.txt"]
    assert entry["status"] == "partial"
    assert entry["problems"]


@pytest.mark.slow
def test_real_import_counts_add_up(real_import: tuple[Path, dict]) -> None:
    _, q = real_import
    s = q["summary"]
    assert sum(s["by_status"].values()) == s["files"]
    assert s["problems"] == s["errors"] + s["warnings"] == sum(len(f["problems"]) for f in q["files"])
    assert s["duplicate_groups"] == len(q["duplicates"])


@pytest.mark.slow
def test_real_import_writes_the_json_dumps_bytes_of_every_record_seed_json_and_summary(
    real_import: tuple[Path, dict], real_data: Path
) -> None:
    """Written piece by piece (runs of numbers encoded by orjson), every text output of the import is the
    text the whole dicts give with json.dumps and the seed summary gives from the seed JSON."""
    from trainsweep import layout
    from trainsweep.artefacts import _json_safe, seed_paths
    from trainsweep.logs import parse
    from trainsweep.summary import dumps_seed_json, format_seed_summary, seed_json

    out, q = real_import
    checked = 0
    for entry in q["files"]:
        if ".tar.gz/" in entry["path"] or not entry["outputs"] or entry["rank"] is not None:
            continue  # a rank file's outputs are its merged run's (tests/unit/test_import_ranks.py)
        run = parse(real_data / entry["path"])
        root = entry["results_root"]
        relative = {target: target[len(root) + 1 :] if root else target for target in entry["outputs"]}
        run.name = next(Path(r).stem for r in relative.values() if r.startswith("runs/"))
        expected = {
            layout.run_record_path(run.name): json.dumps(_json_safe(run.to_record()), indent=1) + "\n"
        }
        paths = seed_paths(run)
        if paths is not None and run.steps_total > 0:
            expected[paths["json"]] = dumps_seed_json(seed_json(run))
            expected[paths["summary"]] = format_seed_summary(seed_json(run))
        for target, rel in relative.items():
            if not rel.endswith(".png"):
                assert (out / target).read_bytes() == expected[rel].encode(), target
                checked += 1
    assert checked > 300


@pytest.mark.slow
def test_real_import_reads_every_instance_type_a_name_folder_or_header_says(
    real_import: tuple[Path, dict],
) -> None:
    # Issue 12: only the ResNet job's log.txt (in model.tar.gz and its extracted copy) says nothing.
    _, q = real_import
    unread = {u["path"]: u["spelling"] for u in q["instance_type_unread"]}
    resnet = "cloud-ML/resnet50-cifar/experimental-results/2020-08-CIFAR-on-sagemaker/output"
    assert unread == {
        f"{resnet}/model.tar.gz/log.txt": None,
        f"{resnet}/model.tar.gz.extracted/log.txt": None,
    }
    assert all(f["instance_type"] for f in q["files"] if f["status"] != "error" and f["path"] not in unread)
    assert {f["instance_type"] for f in q["files"] if "/c4x/" in f["path"]} == {"ml.c4.xlarge"}
    assert q["billing_records"]["found"] == 4 and len(q["billing_records"]["matched"]) == 4


# ---- archives (SageMaker's model.tar.gz carries the log) ------------------------------------------


def _tar(path: Path, members: dict[str, bytes]) -> None:
    import io
    import tarfile

    with tarfile.open(path, "w:gz") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))


def test_logs_inside_a_tar_archive_are_read_without_extracting(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "output").mkdir(parents=True)
    _tar(
        src / "output" / "model.tar.gz",
        {
            "result-p3-1-256-e3.txt": make_log(base=0.6),
            "model.h5": b"\x89HDF\r\n weights",
            "./notes.txt": b"hi",
        },
    )
    out = tmp_path / "out"
    q = by_path(import_dir(src, out, workers=1, report=False).quality)
    assert list(q) == ["output/model.tar.gz/result-p3-1-256-e3.txt"]
    entry = q["output/model.tar.gz/result-p3-1-256-e3.txt"]
    assert (entry["status"], entry["results_root"], entry["steps"]) == ("complete", "output", 10)
    seed = json.loads((out / "output/execution-times/p3-1/256/e3.json").read_text())
    assert seed["epochs"]["2"]["steps"]["1"] == 0.601
    assert not list(tmp_path.rglob("model.h5"))


def test_an_archived_log_and_its_extracted_copy_are_flagged_as_duplicates(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    _tar(src / "model.tar.gz", {"log.txt": make_log()})
    (src / "model.tar.gz.extracted").mkdir()
    (src / "model.tar.gz.extracted" / "log.txt").write_bytes(make_log())
    q = import_dir(src, tmp_path / "out", workers=1, report=False).quality
    assert [sorted(d["paths"]) for d in q["duplicates"]] == [
        ["model.tar.gz.extracted/log.txt", "model.tar.gz/log.txt"]
    ]


def test_a_corrupt_archive_is_skipped_with_the_reason(logs: Path, tmp_path: Path) -> None:
    (logs / "model.tar.gz").write_bytes(b"\x1f\x8b\x08 this is not really gzip")
    result = import_dir(logs, tmp_path / "out", workers=1, report=False)
    assert result.processed == 3
    assert [s["path"] for s in result.skipped] == ["model.tar.gz"]
    assert result.skipped[0]["reason"].startswith("cannot read the archive")


# ---- one read per log, streamed artefacts, bounded memory ----------------------------------------------


def test_each_log_is_read_once_and_its_sha256_and_size_are_the_files(
    logs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import hashlib

    from trainsweep import importer

    opened: list[str] = []
    real = importer._open_log

    def counting(path, member):
        opened.append(Path(path).name)
        return real(path, member)

    monkeypatch.setattr(importer, "_open_log", counting)
    result = import_dir(logs, tmp_path / "out", workers=1, report=False)
    assert sorted(opened) == sorted(p.name for p in logs.iterdir())
    for o in result.files:
        data = (logs / o.path).read_bytes()
        assert (o.sha256, o.size) == (hashlib.sha256(data).hexdigest(), len(data))
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.startswith(".")]  # no staging left


def test_a_log_that_cannot_be_opened_or_read_is_an_unreadable_file_and_the_import_goes_on(
    logs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trainsweep import importer

    real = importer._open_log

    class Failing:
        def __init__(self, f) -> None:
            self.f = f

        def read(self, size: int = -1) -> bytes:
            raise EOFError("Compressed file ended before the end-of-stream marker was reached")

    def broken(path, member):
        name = Path(path).name
        if name == "result-p3-1-256-e1.txt":
            raise PermissionError(13, "Permission denied", path)
        if name == "result-p3-1-512-e0.txt":
            from contextlib import contextmanager

            @contextmanager
            def failing():
                with real(path, member) as f:
                    yield Failing(f)

            return failing()
        return real(path, member)

    monkeypatch.setattr(importer, "_open_log", broken)
    result = import_dir(logs, tmp_path / "out", workers=1, report=False)
    q = by_path(result.quality)
    for name, why in (
        ("result-p3-1-256-e1.txt", "Permission denied"),
        ("result-p3-1-512-e0.txt", "Compressed file ended"),
    ):
        assert q[name]["status"] == "error"
        assert [p["code"] for p in q[name]["problems"]] == ["import.unreadable"]
        assert q[name]["problems"][0]["message"].startswith("cannot read the file: ")
        assert why in q[name]["problems"][0]["message"]
        assert q[name]["sha256"] is None and q[name]["size"] == 0 and q[name]["outputs"] == []
    assert q["result-p3-1-256-e0.txt"]["status"] == "complete"
    assert result.quality["summary"]["by_status"] == {"complete": 1, "error": 2}


def test_a_crash_while_writing_an_artefact_leaves_no_partial_output(
    logs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import trainsweep.artefacts

    real = trainsweep.artefacts.iter_run_artefacts

    def half(run):
        for i, (path, blocks) in enumerate(real(run)):
            if run.name == "result-p3-1-256-e1" and i == 1:
                raise RuntimeError("renderer bug")
            yield path, blocks

    monkeypatch.setattr(trainsweep.artefacts, "iter_run_artefacts", half)
    out = tmp_path / "out"
    result = import_dir(logs, out, workers=1, report=False)
    q = by_path(result.quality)
    assert [p["code"] for p in q["result-p3-1-256-e1.txt"]["problems"]] == ["import.crashed"]
    assert not (out / "execution-times/p3-1/256/e1.json").exists()
    assert (out / "execution-times/p3-1/256/e0.json").is_file()


@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 2])
def test_an_import_with_every_epoch_spilled_to_disk_writes_the_same_bytes(
    logs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    from trainsweep.logs import spill

    (logs / "result-p3-1-512-e1.txt").write_bytes(make_log(epochs=30, steps=70))  # 30 epochs: streamed plot
    import_dir(logs, tmp_path / "kept", workers=workers)
    monkeypatch.setattr(spill, "MEMORY_BUDGET_BYTES", 0)
    result = import_dir(logs, tmp_path / "spilled", workers=workers)
    assert outputs(tmp_path / "spilled") == outputs(tmp_path / "kept")
    assert "execution-times/p3-1/512/e1.png" in outputs(tmp_path / "kept")
    assert result.processed == 4


def test_a_parser_crash_keeps_the_files_sha256_and_size(
    logs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import hashlib

    import trainsweep.logs

    real = trainsweep.logs.parse

    def crashing(source, **kwargs):
        if getattr(source, "name", "").endswith("result-p3-1-256-e1.txt"):
            source.read(10)
            raise RuntimeError("parser bug")
        return real(source, **kwargs)

    monkeypatch.setattr(trainsweep.logs, "parse", crashing)
    result = import_dir(logs, tmp_path / "out", workers=1, report=False)
    entry = by_path(result.quality)["result-p3-1-256-e1.txt"]
    assert [p["code"] for p in entry["problems"]] == ["import.crashed"]
    data = (logs / "result-p3-1-256-e1.txt").read_bytes()
    assert (entry["sha256"], entry["size"]) == (hashlib.sha256(data).hexdigest(), len(data))
