"""The example notebook (examples/notebook.ipynb), executed headless in a fresh kernel as a user runs it:
it plans, runs a local sweep through the Python API and loads its results."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

pytestmark = pytest.mark.slow

NOTEBOOK = Path(__file__).resolve().parents[2] / "examples" / "notebook.ipynb"


def _text(output: dict) -> str:
    if output.get("output_type") == "stream":
        return str(output.get("text", ""))
    data = output.get("data", {})
    return str(data.get("text/html", "")) + str(data.get("text/plain", ""))


def test_the_committed_notebook_holds_no_outputs() -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    assert all(
        not c.get("outputs") and c.get("execution_count") is None for c in nb.cells if c.cell_type == "code"
    )


def test_the_notebook_runs_a_local_sweep_and_loads_its_results(tmp_path: Path) -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    outputs = [
        "".join(_text(o) for o in cell.get("outputs", [])) for cell in nb.cells if cell.cell_type == "code"
    ]
    assert "Worst-case cost: 0.00 USD local mode (2 jobs" in outputs[1]
    (sweep,) = (tmp_path / "trainsweep-results").glob("notebook-*/")
    assert f"sweep <code>{sweep.name}</code> succeeded: 2 done" in outputs[2]  # the run's HTML view
    assert "<b>Recommendation</b>" in outputs[2]
    summary = json.loads((sweep / "results" / "sweep.json").read_text())
    assert summary["recommendation"]["text"][0] in outputs[3]  # results.recommendation_text
    assert outputs[4].count("<td>local</td>") == 2  # the sorted table, one row per batch size
    assert str(sweep.relative_to(tmp_path) / "results" / "report.html") in outputs[5]
