"""Peak memory and time of the ParseRun function on one very long log (a plain script, not a test).

    python benchmarks/bench_parse_run_memory.py [--gb 1.0] [--baseline DIR]

Generates a ``--gb`` GB cloud-ML log (bench_parse's generator: the epochs of every real cloud-ML log,
renumbered into one long run) and puts it under ``sweeps/<id>/logs/`` of a bucket in moto's S3 server,
run by this parent, so the emulator's copies of the log and the artefacts count against this process,
not the function's. Then a child process loads ``lambdas/parse_run/handler.py`` and calls it as the
state machine does once the log's job has ended (the call that writes every artefact of a sweep's log;
its notifications write the run record alone), and prints its peak RSS (VmHWM, read by the child when it
exits), wall time and CPU time against the function's 1,024 MB and 5 minutes. A first child on a 0.5 MB log is
the floor (imports, clients). With ``--baseline DIR`` (an older trainsweep, e.g. ``git archive <commit> |
tar -x -C DIR``), the same log is also parsed by that code. Everything temporary is deleted at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from bench_import_big import HWM_HOOK  # noqa: E402
from bench_parse import REAL, generate_log  # noqa: E402

sys.path.insert(0, str(ROOT))
# the sweep's plan ParseRun looks the log up in, and the job the state machine passes it
from tests.handlers.handler_helpers import jobs_document, planned_job  # noqa: E402
from trainsweep import layout  # noqa: E402

FUNCTION_MB = 1024
FUNCTION_TIMEOUT_S = 300
LAMBDA_MB_PER_VCPU = 1769
"""Lambda allocates CPU in proportion to memory: one vCPU at 1,769 MB (AWS Lambda developer guide)."""
BUCKET = "bench-results"
JOB = "bench-20260101-000000-p3-1-64-e1"
CHILD = (
    HWM_HOOK
    + """
import json, sys, time
from pathlib import Path
from types import SimpleNamespace
import boto3
from botocore.config import Config
from trainsweep.local.lambda_runner import LambdaContext, load_handler

# moto's server joins a multipart upload's parts slowly on a loaded machine: wait for it rather than
# retry (a retried CompleteMultipartUpload finds the upload gone). Real S3 needs neither.
boto3.setup_default_session()
patient = Config(read_timeout=900, retries={"max_attempts": 1})
boto3.DEFAULT_SESSION._session.set_default_client_config(patient)

def Context():  # a fresh invocation's context of a 1 GB ParseRun with a 5-minute timeout
    function = SimpleNamespace(
        function_name="ParseRun",
        function_arn="arn:aws:lambda:us-east-1:123456789012:function:ParseRun",
        memory_size=1024,
    )
    return LambdaContext(function, timeout_s=300)

handler = load_handler(Path(sys.argv[1]) / "lambdas" / "parse_run" / "handler.py")
t = time.perf_counter()
handler(json.loads(sys.argv[2]), Context())
print(json.dumps({"seconds": time.perf_counter() - t}))
"""
)


def run_handler(tmp: Path, endpoint: str, s3: Any, sweep: str, code_root: Path = ROOT) -> dict[str, Any]:
    """Call ParseRun (from ``code_root``) in a child as the state machine does when the job of ``sweep``
    has ended: its peak RSS (MB), wall seconds and the keys of the sweep's results."""
    hwm = tmp / "hwm"
    hwm.unlink(missing_ok=True)
    env = dict(
        os.environ,
        BENCH_HWM=str(hwm),
        PYTHONPATH=str(code_root),
        AWS_ENDPOINT_URL=endpoint,
        AWS_ACCESS_KEY_ID="bench",
        AWS_SECRET_ACCESS_KEY="bench",
        AWS_REGION="us-east-1",
        AWS_DEFAULT_REGION="us-east-1",
        TRAINSWEEP_BUCKET=BUCKET,
        POWERTOOLS_LOG_LEVEL="WARNING",
    )
    outcome = {"training": {"TrainingJobStatus": "Completed"}}
    event = json.dumps({"sweep_id": sweep, "job": planned_job(sweep, JOB), "outcome": outcome})
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(code_root), event],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp,  # not a checkout: `python -c` puts the working folder first on sys.path
    )
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    result = json.loads(out.stdout.strip().splitlines()[-1])
    listed = s3.list_objects_v2(Bucket=BUCKET, Prefix=layout.results_prefix(sweep)).get("Contents", [])
    written = sorted(o["Key"] for o in listed)
    peak_mb = int(hwm.read_text()) / 1024
    return {"peak_mb": peak_mb, "wall_s": wall, "cpu_s": cpu, "written": written, **result}


def start_s3() -> tuple[Any, str, Any]:
    """moto's S3 server in this process, with the bucket: (server, endpoint, client)."""
    import logging

    import boto3
    from botocore.config import Config
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    s3 = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="bench",
        aws_secret_access_key="bench",
        config=Config(read_timeout=900, retries={"max_attempts": 1}),
    )
    s3.create_bucket(Bucket=BUCKET)
    return server, endpoint, s3


def measure(tmp: Path, gigabytes: float, baseline: Path | None = None) -> dict[str, Any]:
    """Generate the log, then the floor and the big log's figures (and the baseline code's)."""
    from boto3.s3.transfer import TransferConfig

    server, endpoint, s3 = start_s3()
    try:
        log = tmp / "big.log"
        size, blocks = generate_log(log, gigabytes)
        small = tmp / "small.log"
        generate_log(small, 0.0005)  # a few epochs: every artefact, every import
        whole = TransferConfig(multipart_threshold=1 << 40)  # one PUT: no slow join in moto
        for sweep in ("floor", "big"):  # ParseRun records only the logs of a planned job
            jobs = jobs_document([planned_job(sweep, JOB)])
            s3.put_object(Bucket=BUCKET, Key=layout.jobs_key(sweep), Body=jobs)
        s3.upload_file(str(small), BUCKET, f"sweeps/floor/logs/{JOB}.log", Config=whole)
        s3.upload_file(str(log), BUCKET, f"sweeps/big/logs/{JOB}.log", Config=whole)
        log.unlink()
        figures: dict[str, Any] = {"log_mb": size / 1e6, "epochs": blocks}
        figures["floor"] = run_handler(tmp, endpoint, s3, "floor")
        figures["big"] = run_handler(tmp, endpoint, s3, "big")
        prefix = "sweeps/big/results/"
        listed = s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", [])
        figures["artefacts_mb"] = sum(o["Size"] for o in listed) / 1e6
        if baseline is not None:
            figures["baseline"] = run_handler(tmp, endpoint, s3, "big", baseline)
        return figures
    finally:
        server.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gb", type=float, default=1.0, help="size of the generated log (GB)")
    ap.add_argument("--baseline", type=Path, help="an older trainsweep checkout to compare with")
    args = ap.parse_args()
    if not REAL.is_dir():
        sys.exit(f"real data not found at {REAL}")
    tmp = Path(tempfile.mkdtemp(prefix="bench-parse-run-"))
    try:
        f = measure(tmp, args.gb, args.baseline)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(
        f"ParseRun on one generated {f['log_mb'] / 1e3:.2f} GB log ({f['epochs']:,} epochs; "
        f"{f['artefacts_mb']:.0f} MB of artefacts written)"
    )
    rows = [("floor, 0.5 MB log", f["floor"]), ("this checkout", f["big"])]
    if "baseline" in f:
        rows.append((f"baseline {args.baseline}", f["baseline"]))
    for label, r in rows:
        print(
            f"  {label + ':':28s} peak RSS {r['peak_mb']:7.1f} MB (function: {FUNCTION_MB} MB), "
            f"handler {r['seconds']:6.1f} s wall (timeout {FUNCTION_TIMEOUT_S} s), child CPU "
            f"{r['cpu_s']:6.1f} s, {len(r['written'])} objects"
        )
    print(
        f"  Lambda gives a {FUNCTION_MB} MB function {FUNCTION_MB / LAMBDA_MB_PER_VCPU:.2f} of a vCPU: "
        f"about {f['big']['cpu_s'] * LAMBDA_MB_PER_VCPU / FUNCTION_MB:.0f} s of wall time for this CPU "
        "time on a machine like this one, S3 transfers aside"
    )


if __name__ == "__main__":
    main()
