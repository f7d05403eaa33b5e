"""End to end: a Hugging Face ``Trainer`` script with nothing trainsweep-specific in it, swept with
``trainsweep run SPEC --local``: the automatic hooks alone (the Trainer's DataLoader and optimizer steps)
give one step per optimizer update, one epoch per Trainer epoch, and the evaluation as its validation.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from trainsweep import layout
from trainsweep.cli import app

pytestmark = pytest.mark.slow
pytest.importorskip("transformers")
ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "examples" / "byo-huggingface" / "sweep.yaml"
TRAIN_SAMPLES = 1792  # 87.5 % of the script's 2,048 generated sentences
EPOCHS = 2


def _run(spec: Path, out: Path) -> Path:
    result = CliRunner().invoke(app, ["run", str(spec), "--local", "--no-watch", "--out", str(out)])
    assert result.exit_code == 0, result.output
    (folder,) = [d for d in out.iterdir() if d.is_dir()]
    return folder


def _record(folder: Path, run: str) -> dict[str, Any]:
    return json.loads((folder / layout.RESULTS_DIR / layout.run_record_path(run)).read_text())


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example swept once; every test reads its results."""
    return _run(SPEC, tmp_path_factory.mktemp("byo-hf"))


def test_every_batch_size_of_the_trainer_script_completes(swept):
    cells = json.loads((swept / layout.JOBS_JSON).read_text())["cells"]
    assert {c["batch_size"]: c["status"] for c in cells} == dict.fromkeys((16, 32, 64), "completed")


@pytest.mark.parametrize("batch_size", [16, 32, 64])
def test_each_epoch_counts_one_step_per_optimizer_update_and_times_the_evaluation(swept, batch_size):
    record = _record(swept, f"{swept.name}-local-cpu-{batch_size}-e0")
    assert record["status"] == "complete", record["problems"]
    assert record["header"]["batch_size"] == batch_size
    steps = -(-TRAIN_SAMPLES // batch_size)
    epochs = record["epochs"]
    assert [len(e["step_s"]) for e in epochs] == [steps] * EPOCHS  # evaluation batches are no steps
    assert all(e["validation_s"] > 0 for e in epochs)
    assert "steps-per-epoch" not in [p["code"] for p in record["problems"]]
