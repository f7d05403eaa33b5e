"""parse() reads paths, bytes, binary files and chunk iterables alike; the run is named from its file."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

from trainsweep.logs import parse


def _same_content(a: dict, b: dict) -> None:
    for k in ("name", "computing_system"):
        a.pop(k), b.pop(k)
    assert a == b


def test_bytes_file_object_and_path_give_the_same_run(tmp_path: Path, cloudml_log) -> None:
    data = cloudml_log()
    path = tmp_path / "result-p3-1-256-e2.txt"
    path.write_bytes(data)
    from_path = parse(path).to_record()
    with path.open("rb") as f:
        from_file = parse(f).to_record()
    from_bytes = parse(data, name=path.name).to_record()
    assert from_path == from_file == from_bytes


def test_one_byte_chunks_give_the_same_run_as_the_whole(cloudml_log) -> None:
    data = cloudml_log()
    whole = parse(data).to_record()
    chunked = parse(data[i : i + 1] for i in range(len(data))).to_record()
    _same_content(whole, chunked)


def test_bytes_read_lines_read_and_sha256_are_counted(cloudml_log) -> None:
    data = cloudml_log() + b"no newline at the end"
    run = parse(io.BytesIO(data))
    assert run.bytes_read == len(data)
    assert run.lines_read == data.count(b"\n") + 1
    assert run.sha256 == hashlib.sha256(data).hexdigest()


def test_the_cell_is_inferred_from_a_seed_log_name(cloudml_log) -> None:
    run = parse(cloudml_log(), name="result-g4dn-1-256-e3.txt")
    assert (run.name, run.computing_system, run.batch_size, run.run_index) == (
        "result-g4dn-1-256-e3",
        "g4dn-1",
        256,
        3,
    )


def test_the_cell_is_inferred_from_a_trainsweep_job_name(cloudml_log) -> None:
    run = parse(cloudml_log(), name="mnist-2026-p3-1-256-e2")
    assert (run.computing_system, run.batch_size, run.run_index) == ("p3-1", 256, 2)


def test_an_old_ec2_name_takes_its_instance_type_from_the_folder(tmp_path: Path, cloudml_log) -> None:
    folder = tmp_path / "p3.2xlarge"
    folder.mkdir()
    (folder / "result-1-256-e4.out").write_bytes(cloudml_log())
    run = parse(folder / "result-1-256-e4.out")
    assert (run.computing_system, run.batch_size, run.run_index) == ("p3-1", 256, 4)


def test_explicit_arguments_win_over_the_name(cloudml_log) -> None:
    run = parse(
        cloudml_log(), name="result-p3-1-256-e3.txt", computing_system="p2-8", batch_size=512, run_index=9
    )
    assert (run.computing_system, run.batch_size, run.run_index) == ("p2-8", 512, 9)


def test_a_name_without_a_cell_leaves_the_cell_unknown(cloudml_log) -> None:
    run = parse(cloudml_log(), name="training.log")
    assert (run.name, run.computing_system, run.batch_size, run.run_index) == ("training", None, None, None)


def test_a_missing_file_is_an_unreadable_run_not_an_exception(tmp_path: Path) -> None:
    run = parse(tmp_path / "result-p3-1-256-e0.txt")
    assert run.status == "unreadable"
    assert [p.code for p in run.problems] == ["read-error"]
    assert run.computing_system == "p3-1"


def test_text_chunks_are_refused_with_a_clear_problem() -> None:
    run = parse(["1 step training time: 0.5s\n"])
    assert run.status == "unreadable"
    assert "bytes, not str" in run.problems[0].message


def test_the_sha256_of_a_log_of_many_chunks_is_the_whole_logs(cloudml_log) -> None:
    data = cloudml_log() * 2000  # several 1 MiB chunks: hashed on a second thread from the second on
    assert len(data) > 3 * 2**20
    assert parse(data).sha256 == hashlib.sha256(data).hexdigest()
    buffer = bytearray(1000)

    def reused():  # a caller that hands over one buffer, refilled: each chunk is copied before it waits
        for i in range(0, len(data), 1000):
            piece = data[i : i + 1000]
            buffer[: len(piece)] = piece
            yield memoryview(buffer)[: len(piece)]

    assert parse(reused()).sha256 == hashlib.sha256(data).hexdigest()


def test_a_reader_that_crashes_ends_the_hashing_thread_with_it(cloudml_log, monkeypatch) -> None:
    import threading

    import pytest

    from trainsweep.logs.cloudml import CloudMLReader

    def crash(self, region, newlines_before):
        raise RuntimeError("a reader's bug")

    monkeypatch.setattr(CloudMLReader, "feed", crash)
    with pytest.raises(RuntimeError, match="a reader's bug"):
        parse([b"Epoch 1/1\n" * 1000] * 3)  # three chunks: the thread has started
    assert not [t for t in threading.enumerate() if t.name == "trainsweep-sha256"]
