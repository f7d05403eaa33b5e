"""Own training code through the CLI: every bad input that must be refused before anything starts.

``trainsweep run SPEC --local`` checks the script, its folder's size and (local mode runs in this Python
environment) its requirements before it starts the embedded AWS; ``plan`` refuses a spec that says
nothing to train. Each test goes through the command a user types.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trainsweep.cli import app

runner = CliRunner()


def _spec(folder: Path, workload: str, extra: str = "") -> Path:
    path = folder / "sweep.yaml"
    path.write_text(f"name: t\nworkload: {workload}\ninstance_types: [local]\nbatch_sizes: [32]\n{extra}")
    return path


def _run_local(spec: Path, tmp_path: Path) -> tuple[int, str]:
    result = runner.invoke(app, ["run", str(spec), "--local", "--no-watch", "--out", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists(), "nothing may start (or be downloaded) for a refused sweep"
    return result.exit_code, " ".join(result.output.split())


def test_a_workload_with_nothing_to_train_is_refused_with_what_to_give(tmp_path):
    result = runner.invoke(app, ["plan", str(_spec(tmp_path, "{epochs: 2}"))])
    assert result.exit_code == 2
    assert (
        "say what to train: command (your command line), entry_point (your script), image_uri (your "
        "image) or model"
    ) in " ".join(result.output.split())


def test_an_entry_point_that_does_not_exist_is_refused_before_anything_starts(tmp_path):
    code, out = _run_local(_spec(tmp_path, "{entry_point: trian.py}"), tmp_path)
    assert code == 1
    assert "workload.entry_point: 'trian.py' not found" in out
    assert str(tmp_path / "trian.py") in out


def test_an_entry_point_missing_from_its_source_dir_names_the_folder(tmp_path):
    (tmp_path / "project").mkdir()
    code, out = _run_local(_spec(tmp_path, "{entry_point: train.py, source_dir: project}"), tmp_path)
    assert code == 1
    assert f"not found in source_dir {tmp_path / 'project'}" in out


def test_a_source_dir_over_the_limit_is_refused_naming_its_largest_parts(tmp_path):
    (tmp_path / "train.py").write_text("print('hi')\n")
    (tmp_path / "data").mkdir()
    with (tmp_path / "data" / "images.bin").open("wb") as f:  # sparse: 101 MB on paper, nothing on disk
        f.truncate(101 * 1024 * 1024)
    code, out = _run_local(_spec(tmp_path, "{entry_point: train.py}"), tmp_path)
    assert code == 1
    assert "over the 100 MB limit" in out
    assert "data (101.0 MB)" in out
    assert ".gitignore" in out


def test_a_gitignored_data_folder_does_not_count_against_the_limit(tmp_path):
    from trainsweep.sourcedir import pack

    (tmp_path / "train.py").write_text("print('hi')\n")
    (tmp_path / "data").mkdir()
    with (tmp_path / "data" / "images.bin").open("wb") as f:
        f.truncate(101 * 1024 * 1024)
    (tmp_path / ".gitignore").write_text("data/\n")
    packed = pack(tmp_path)
    assert packed.files == 2  # train.py and .gitignore


def test_requirements_missing_from_this_environment_are_named_before_any_job_starts(tmp_path):
    (tmp_path / "train.py").write_text("import nosuchpackage_xyz\n")
    (tmp_path / "requirements.txt").write_text("# deps\nnosuchpackage-xyz>=1.0\nnumpy>=1\ntorch<1.0\n")
    code, out = _run_local(_spec(tmp_path, "{entry_point: train.py}"), tmp_path)
    assert code == 1
    assert "nosuchpackage-xyz (not installed, wants >=1.0)" in out
    assert "torch (wants <1.0, has 2.13.0" in out
    assert "numpy" not in out.split("asks for:")[1]  # satisfied: not listed
    assert f"pip install -r {tmp_path / 'requirements.txt'}" in out


def test_an_image_is_refused_in_local_mode_with_the_reason(tmp_path):
    spec = _spec(tmp_path, "{image_uri: 123456789012.dkr.ecr.us-east-1.amazonaws.com/train:1}")
    code, out = _run_local(spec, tmp_path)
    assert code == 2
    assert "local mode runs training code as processes on this machine (no Docker engine)" in out


def test_plan_names_a_script_sweep_by_its_script(tmp_path):
    (tmp_path / "train.py").write_text("")
    result = runner.invoke(app, ["plan", str(_spec(tmp_path, "{entry_point: train.py, epochs: 3}"))])
    assert result.exit_code == 0, result.output
    assert "train.py (3 epochs, full)" in result.output


def test_links_to_folders_in_the_tree_are_packed_as_links_and_a_link_loop_packs_each_file_once(tmp_path):
    from trainsweep.sourcedir import pack, unpack

    src = tmp_path / "project"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "model.py").write_text("X = 1\n")
    (src / "train.py").write_text("from alias.model import X\n")
    (src / "pkg" / "self").symlink_to("../pkg")  # a loop: pkg/self/self/... is pkg again
    (src / "alias").symlink_to("pkg")
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "key").write_text("no\n")
    (src / "out").symlink_to(tmp_path / "secret")  # out of the tree: left out

    packed = pack(src)
    assert packed.files == 2  # train.py and pkg/model.py, each once
    dest = tmp_path / "unpacked"
    unpack(packed.data, dest)
    assert (dest / "alias").is_symlink() and (dest / "alias" / "model.py").read_text() == "X = 1\n"
    loop = dest / "pkg" / "self"
    assert loop.is_symlink() and loop.resolve() == (dest / "pkg").resolve()
    assert not (dest / "out").exists()
    assert pack(src).data == packed.data  # still deterministic


def test_a_file_that_shrinks_while_it_is_packed_is_a_clear_error(tmp_path, monkeypatch):
    from trainsweep.sourcedir import SourceError, pack

    (tmp_path / "train.py").write_text("print('hi')\n")
    (tmp_path / "log.txt").write_text("x" * 1000)
    real_open = Path.open

    def open_after_truncating(self, *args, **kwargs):
        if self.name == "log.txt":
            os.truncate(self, 1)  # another process rewrote it after it was measured
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", open_after_truncating)
    with pytest.raises(SourceError, match=r"log\.txt changed while it was packed"):
        pack(tmp_path)
