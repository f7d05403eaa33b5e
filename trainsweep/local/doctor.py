"""``trainsweep doctor``: is this machine ready for local and cloud sweeps? Each check says what to do.

Every probe is injectable (``which``, ``run``, ``session``) so the checks are tested without a network.
AWS calls use short timeouts and no retries: a machine without AWS access gets an answer at once.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from trainsweep.local.deploy import PROJECT_ROOT

Level = Literal["ok", "warn", "fail", "info"]
MIN_PYTHON = (3, 11)
MIN_NODE = 18
COMMON_TYPES = ("ml.g4dn.xlarge", "ml.g5.xlarge", "ml.p3.2xlarge")


@dataclass(frozen=True)
class Check:
    name: str
    level: Level
    detail: str
    fix: str | None = None


Runner = Callable[[list[str]], tuple[int, str]]


def _run(cmd: list[str]) -> tuple[int, str]:
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False, cwd=PROJECT_ROOT)
    except (OSError, subprocess.SubprocessError) as exc:
        return 127, str(exc)
    return p.returncode, (p.stdout or p.stderr).strip()


def check_python(version: tuple[int, int] = sys.version_info[:2]) -> Check:
    text = ".".join(map(str, version))
    if version >= MIN_PYTHON:
        return Check("Python", "ok", text)
    return Check("Python", "fail", text, f"install Python {'.'.join(map(str, MIN_PYTHON))} or newer")


def check_packages(find: Callable[[str], Any] = importlib.util.find_spec) -> list[Check]:
    wanted = {
        "boto3": ("boto3", "cloud and local sweeps"),
        "moto": ("moto", "local mode"),
        "aws_cdk": ("aws-cdk-lib", "local mode and deploys"),
        "torch": ("torch", "local training jobs"),
    }
    checks = []
    for module, (dist, why) in wanted.items():
        if find(module) is None:
            checks.append(
                Check(
                    f"package {dist}",
                    "fail",
                    f"missing (needed for {why})",
                    "pip install -r requirements.txt",
                )
            )
            continue
        try:
            version = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            version = "installed"
        checks.append(Check(f"package {dist}", "ok", version))
    return checks


def check_node(which: Callable[[str], str | None] = shutil.which, run: Runner = _run) -> Check:
    if which("node") is None:
        return Check(
            "Node.js", "warn", "not found (the CDK needs it)", f"install Node.js {MIN_NODE}+ (e.g. 20 LTS)"
        )
    rc, out = run(["node", "--version"])
    m = re.match(r"v(\d+)", out)
    if rc != 0 or not m:
        return Check("Node.js", "warn", f"`node --version` failed: {out[:80]}", "reinstall Node.js")
    if int(m.group(1)) < MIN_NODE:
        return Check("Node.js", "warn", out, f"install Node.js {MIN_NODE}+")
    return Check("Node.js", "ok", out)


def pinned_cdk_cli(root: Path = PROJECT_ROOT) -> str | None:
    """The aws-cdk CLI version package.json pins (None if it pins none)."""
    try:
        pkg = json.loads((root / "package.json").read_text())
    except (OSError, ValueError):
        return None
    for section in ("devDependencies", "dependencies"):
        version = pkg.get(section, {}).get("aws-cdk")
        if version:
            return str(version).lstrip("^~=")
    return None


def check_cdk_cli(
    which: Callable[[str], str | None] = shutil.which, run: Runner = _run, root: Path = PROJECT_ROOT
) -> Check:
    pinned = pinned_cdk_cli(root)
    local_bin = root / "node_modules" / ".bin" / "cdk"
    exe = str(local_bin) if local_bin.exists() else which("cdk")
    fix = "npm ci (installs the pinned aws-cdk CLI into node_modules)"
    if exe is None:
        return Check("CDK CLI", "warn", "not installed (needed for `cdk deploy`, not for --local)", fix)
    rc, out = run([exe, "--version"])
    m = re.search(r"(\d+\.\d+\.\d+)", out)
    if rc != 0 or not m:
        return Check("CDK CLI", "warn", f"`cdk --version` failed: {out[:80]}", fix)
    if pinned and m.group(1) != pinned:
        return Check(
            "CDK CLI",
            "warn",
            f"{m.group(1)}, the project pins {pinned} (other versions can't read the assembly)",
            fix,
        )
    return Check("CDK CLI", "ok", m.group(1))


def check_log_scanner(built: bool | None = None) -> Check:
    """The optional C scanner that doubles log-parsing speed (built by ``pip install`` with a C compiler);
    ``built``: None to look at this install."""
    if built is None:
        from trainsweep.logs import native

        built = native.scan_stretch is not None
    if built:
        return Check("log scanner", "ok", "C scanner built (trainsweep/logs/_scan.c)")
    return Check(
        "log scanner",
        "warn",
        "C scanner not built or turned off (TRAINSWEEP_PURE_PYTHON): logs parse at about half the speed",
        "install gcc and the Python headers (python3-dev), then `pip install -e .` again",
    )


def check_gpu(which: Callable[[str], str | None] = shutil.which, run: Runner = _run) -> Check:
    if which("nvidia-smi") is None:
        return Check("GPU", "info", "none (nvidia-smi not found): local sweeps use 'local' (CPU)")
    rc, out = run(["nvidia-smi", "-L"])
    gpus = [line for line in out.splitlines() if line.startswith("GPU")]
    if rc != 0 or not gpus:
        return Check("GPU", "warn", f"nvidia-smi found no GPU: {out[:80]}", "check the NVIDIA driver")
    return Check("GPU", "ok", f"{len(gpus)} GPU(s): {gpus[0]} — 'local_gpu' is available")


def check_aws(session: Any, stack: str) -> list[Check]:
    """Credentials, region, the deployed stack and the training quotas (where readable)."""
    from botocore.config import Config

    cfg = Config(connect_timeout=3, read_timeout=5, retries={"max_attempts": 1})
    checks: list[Check] = []
    region = session.region_name
    if region:
        checks.append(Check("AWS region", "ok", region))
    else:
        checks.append(
            Check("AWS region", "warn", "none configured", "pass --region or `aws configure set region`")
        )
    try:
        creds = session.get_credentials()
    except Exception as exc:
        creds = None
        checks.append(Check("AWS credentials", "warn", f"unreadable: {exc}", "aws configure / aws sso login"))
    if creds is None:
        if not any(c.name == "AWS credentials" for c in checks):
            checks.append(
                Check(
                    "AWS credentials",
                    "warn",
                    "none found (cloud sweeps need them; --local does not)",
                    "aws configure, or aws sso login --profile NAME",
                )
            )
        return checks
    try:
        ident = session.client("sts", region_name=region or "us-east-1", config=cfg).get_caller_identity()
        checks.append(Check("AWS credentials", "ok", f"account {ident['Account']} ({ident['Arn']})"))
    except Exception as exc:
        checks.append(
            Check("AWS credentials", "warn", f"not usable: {str(exc)[:120]}", "refresh them (aws sso login)")
        )
        return checks
    if not region:
        return checks
    try:
        cfn = session.client("cloudformation", config=cfg)
        status = cfn.describe_stacks(StackName=stack)["Stacks"][0]["StackStatus"]
        level: Level = "ok" if status.endswith("_COMPLETE") and "ROLLBACK" not in status else "warn"
        checks.append(Check(f"stack {stack}", level, status, "redeploy with `npx cdk deploy`"))
    except Exception as exc:
        checks.append(
            Check(
                f"stack {stack}",
                "warn",
                f"not deployed in {region} ({str(exc)[:80]})",
                "`npx cdk deploy` once per account/region, or pass --stack NAME",
            )
        )
    try:
        from trainsweep.aws.quotas import training_instance_quotas

        quotas = training_instance_quotas(session.client("service-quotas", config=cfg), COMMON_TYPES)
        readable = {t: q for t, q in quotas.items() if q is not None}
        if readable:
            zero = [t for t, q in readable.items() if q == 0]
            text = ", ".join(f"{t}={q}" for t, q in readable.items())
            fix = "request an increase in the Service Quotas console" if zero else None
            checks.append(Check("training quotas", "warn" if zero else "ok", text, fix))
        else:
            checks.append(
                Check("training quotas", "info", "not readable (servicequotas permission); not required")
            )
    except Exception as exc:
        checks.append(Check("training quotas", "info", f"not readable: {str(exc)[:80]}"))
    return checks


def run_checks(
    *,
    stack: str,
    profile: str | None = None,
    region: str | None = None,
    which: Callable[[str], str | None] = shutil.which,
    run: Runner = _run,
    session: Any | None = None,
) -> list[Check]:
    """Every check, in the order ``doctor`` prints them."""
    checks = [
        check_python(),
        *check_packages(),
        check_node(which, run),
        check_cdk_cli(which, run),
        check_gpu(which, run),
        check_log_scanner(),
    ]
    if session is None:
        try:
            import boto3

            session = boto3.Session(profile_name=profile, region_name=region)
        except Exception as exc:
            checks.append(Check("AWS profile", "fail", str(exc), "aws configure list-profiles"))
            return checks
    checks += check_aws(session, stack)
    return checks
