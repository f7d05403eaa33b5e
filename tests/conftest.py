"""Shared test fixtures: where the real data lives, fake AWS credentials for every test, a synthetic
cloud-ML log, a browser."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

# Two xdist workers on a 2-core machine each run sweeps whose job processes train with PyTorch, which starts
# one thread per core in every process: more busy threads than cores wait on each other at every parallel
# region (an epoch of the byo example took 54 s instead of 3 s). One thread per process, for the tests'
# own processes and every process they start; a test may set its own.
os.environ.setdefault("OMP_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parents[1]
REAL_DATA = ROOT.parent / "shared" / "fixtures" / "real-data"


@pytest.fixture(scope="session")
def real_data() -> Path:
    """``../shared/fixtures/real-data`` (read-only; never copied into the repository)."""
    if not REAL_DATA.is_dir():
        pytest.fail(f"real data not found at {REAL_DATA}: the project expects ../shared beside its root")
    return REAL_DATA


@pytest.fixture(autouse=True)
def _fake_aws_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test may reach AWS: dummy credentials and a fixed region for every test."""
    for k in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")


def _cloudml_log(
    *,
    epochs: int = 3,
    announced: int | None = None,
    steps: int = 4,
    batch_size: int = 256,
    samples: int = 1024,
    step_s: float = 0.0125,
    unit: str = "s",
    command: bool = True,
    final: bool = True,
    python2_init: bool = False,
) -> bytes:
    """A cloud-ML (MNIST-style) log: init, per-epoch header, Real time, steps, validation, epoch time."""
    lines: list[str] = []
    if command:
        lines.append(
            f"python3 mnist_cnn.py --batch-size {batch_size} --num-gpus 1 --epochs {announced or epochs}"
        )
    lines.append(f"x_train shape: ({samples}, 28, 28, 1)")
    lines.append("('Tempo de inicializacao: ', 0.25)" if python2_init else "Initialization time 0.25")
    lines.append(f"Train on {samples} samples, validate on 100 samples")
    t = 1_600_000_000.0
    for e in range(1, epochs + 1):
        lines += [f"Epoch {e}/{announced or epochs}", "", f"Real time: {t}", ""]
        for s in range(1, steps + 1):
            done = min(s * batch_size, samples)
            lines.append(f"{done:>6}/{samples} [=>....] - ETA: 1s - loss: 0.5 - accuracy: 0.9")
            lines.append(f"{s} step training time: {step_s * (10 if s == 1 and e == 1 else 1)}{unit}")
            lines.append("")
        lines.append(
            f"{samples}/{samples} [==============================] - 1s - loss: 0.1 - val_accuracy: 0.9{e}"
        )
        lines.append(f"Validation time: 0.05{e}{unit}")
        t += 1.5
        lines += ["", f"Real time: {t}{unit}", "", f"Epoch time: 1.5{e}{unit}"]
    if final:
        lines.append("Duracao do treinamento: 5.5")
    return ("\n".join(lines) + "\n").encode()


@pytest.fixture
def cloudml_log() -> Callable[..., bytes]:
    """``cloudml_log(epochs=3, steps=4, ...)`` -> bytes of a well-formed cloud-ML log."""
    return _cloudml_log


CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")


@pytest.fixture(scope="session")
def chromium(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A headless Chromium (Debian's ``chromium`` and ``chromium-driver``) driven through selenium."""
    if not (CHROMIUM and CHROMEDRIVER):
        pytest.skip(
            "needs Debian's chromium and chromium-driver (apt-get install -y chromium chromium-driver)"
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
    ):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=opts, service=Service(CHROMEDRIVER))
    yield driver
    driver.quit()


VIEWPORTS = {"laptop": (1366, 768), "phone": (390, 844)}
"""CSS pixels: a common laptop screen and a common phone's."""

# What a reader sees of the report's layout: page overflow, the configuration table's row heights
# against its font size, images and the recommendation inside the viewport.
_LAYOUT_JS = """
const table = document.querySelector('#sweep-table');
const rows = Array.from(table.tBodies[0].rows);
const font = parseFloat(getComputedStyle(table).fontSize);
const rec = document.querySelector('#recommendation').getBoundingClientRect();
return {
  innerWidth: window.innerWidth,
  pageWidth: document.documentElement.scrollWidth,
  font: font,
  rows: rows.map(r => ({cls: r.className, height: r.getBoundingClientRect().height})),
  images: Array.from(document.images).map(i => i.getBoundingClientRect().right),
  recommendation: rec.right,
};
"""


@pytest.fixture
def layout_at() -> Callable[[Any, Path, str], dict[str, Any]]:
    """``layout_at(driver, page, "laptop" | "phone")``: the page's layout at that viewport (a phone is
    emulated as a mobile device, so the page's viewport meta applies)."""

    def measure(driver: Any, page: Path, viewport: str) -> dict[str, Any]:
        width, height = VIEWPORTS[viewport]
        driver.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600},
        )
        driver.get(page.as_uri())
        return dict(driver.execute_script(_LAYOUT_JS))

    return measure


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_healthy(server: subprocess.Popen[bytes], uri: str, log: Path) -> None:
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(f"{uri}/health", timeout=2) as reply:
                if reply.status == 200:
                    return
        except OSError:
            pass
        assert server.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, "mlflow server did not start"
        time.sleep(0.5)


@pytest.fixture(scope="session")
def mlflow_tracking_uri(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real MLflow tracking server (``mlflow server`` on a loopback port, SQLite store), started once
    for the tests that use it and stopped after them."""
    pytest.importorskip("mlflow", reason="the mlflow extra (requirements.txt installs it)")
    work = tmp_path_factory.mktemp("mlflow")
    port = _free_port()
    command = [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port)]
    command += ["--backend-store-uri", f"sqlite:///{work / 'mlflow.db'}"]
    command += ["--artifacts-destination", str(work / "artifacts"), "--workers", "1"]
    log = (work / "server.log").open("wb")
    server = subprocess.Popen(command, cwd=work, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    uri = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(server, uri, work / "server.log")
        yield uri
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        log.close()
