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
from typing import Any, Literal, cast

from trainsweep.local.deploy import PROJECT_ROOT

Level = Literal["ok", "warn", "fail", "info"]
MIN_PYTHON = (3, 11)
MIN_NODE = 18
COMMON_TYPES = ("ml.g4dn.xlarge", "ml.g5.xlarge", "ml.p3.2xlarge")
BOOTSTRAP_STACK = "CDKToolkit"
LAMBDA_MIN_UNRESERVED = 100  # Lambda refuses a reservation that leaves fewer unreserved executions
PARSE_RESERVED_CONTEXT = "parse_reserved_concurrency"


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
                    "scripts/install (the locked environment; or pip install -r requirements.txt)",
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


def check_bytecode(
    find: Callable[[str], Any] = importlib.util.find_spec, writes: bool | None = None
) -> Check:
    """Whether torch's compiled bytecode is installed: each training cell is a fresh process that imports
    it, and where Python may not write bytecode (``PYTHONDONTWRITEBYTECODE``) an install without it is
    compiled again by every one (about 3 s, ``benchmarks/bench_startup.py``). ``writes``: None to ask
    this interpreter."""
    writes = not sys.dont_write_bytecode if writes is None else writes
    spec = find("torch")
    if spec is None or spec.origin is None:
        return Check("bytecode", "info", "torch is not installed here (cloud sweeps only)")
    if Path(importlib.util.cache_from_source(spec.origin)).is_file():
        return Check("bytecode", "ok", "torch's bytecode is installed")
    if writes:
        return Check("bytecode", "ok", "torch's bytecode is written on its first import")
    return Check(
        "bytecode",
        "warn",
        "torch has no bytecode and PYTHONDONTWRITEBYTECODE is set: every training process compiles it "
        "again (about 3 s each)",
        "reinstall the environment with scripts/install (uv --compile-bytecode), or run "
        "`python -m compileall -q` on its site-packages",
    )


def check_gpu(which: Callable[[str], str | None] = shutil.which, run: Runner = _run) -> Check:
    if which("nvidia-smi") is None:
        return Check("GPU", "info", "none (nvidia-smi not found): local sweeps use 'local' (CPU)")
    rc, out = run(["nvidia-smi", "-L"])
    gpus = [line for line in out.splitlines() if line.startswith("GPU")]
    if rc != 0 or not gpus:
        return Check("GPU", "warn", f"nvidia-smi found no GPU: {out[:80]}", "check the NVIDIA driver")
    return Check("GPU", "ok", f"{len(gpus)} GPU(s): {gpus[0]} — 'local_gpu' is available")


def check_aws(session: Any, stack: str, spec: Any | None = None) -> list[Check]:
    """Credentials, region, the deployed stack, the CDK bootstrap, and the training quotas (where readable)
    and prices of the spec's instance types (without a spec: common GPU types)."""
    from botocore.config import Config

    cfg = Config(connect_timeout=3, read_timeout=5, retries={"max_attempts": 1})
    checks: list[Check] = []
    region = session.region_name
    source = getattr(session, "region_source", None)
    if region:
        checks.append(Check("AWS region", "ok", f"{region} (from {source})" if source else region))
    else:
        checks.append(
            Check(
                "AWS region",
                "warn",
                "none configured",
                "pass --region, set AWS_REGION (as `cdk deploy` reads it) or `aws configure set region`",
            )
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
    checks.append(check_bootstrap(session.client("cloudformation", config=cfg), region))
    checks.append(check_lambda_concurrency(session.client("lambda", config=cfg), reserved_in_cdk_json()))
    checks += check_account_for_spec(session, stack, spec, cfg)
    return checks


def check_bootstrap(cfn: Any, region: str) -> Check:
    """The CDK bootstrap stack (``CDKToolkit``: the asset bucket and ECR repository ``cdk deploy`` uploads
    the functions and the training image to) in the region."""
    fix = f"npx cdk bootstrap aws://ACCOUNT/{region} (once per account and region)"
    try:
        found = cfn.describe_stacks(StackName=BOOTSTRAP_STACK)["Stacks"][0]
    except Exception as exc:
        return Check(
            "CDK bootstrap", "warn", f"no {BOOTSTRAP_STACK} stack in {region} ({str(exc)[:80]})", fix
        )
    status = found["StackStatus"]
    version = {o["OutputKey"]: o["OutputValue"] for o in found.get("Outputs", [])}.get("BootstrapVersion")
    detail = f"{BOOTSTRAP_STACK} {status}" + (f", bootstrap version {version}" if version else "")
    ok = status.endswith("_COMPLETE") and "ROLLBACK" not in status and "DELETE" not in status
    return Check("CDK bootstrap", "ok" if ok else "warn", detail, fix)


def reserved_in_cdk_json(root: Path = PROJECT_ROOT) -> int:
    """ParseRun's reserved concurrency as ``cdk.json`` sets it (0 when unset or unreadable)."""
    try:
        value = json.loads((root / "cdk.json").read_text())["context"].get(PARSE_RESERVED_CONTEXT)
        return max(0, int(value or 0))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return 0


def check_lambda_concurrency(lam: Any, wanted: int) -> Check:
    """Whether the account can afford ParseRun's reserved concurrency (``wanted``; 0: none reserved).

    Lambda refuses a reservation that leaves fewer than 100 executions unreserved, which is every
    reservation on an account whose limit is a new account's 10 or 50: ``cdk deploy`` would fail.
    """
    name = "Lambda concurrency"
    try:
        settings = lam.get_account_settings()["AccountLimit"]
    except Exception as exc:
        return Check(name, "info", f"not readable: {str(exc)[:80]}")
    limit = int(settings.get("ConcurrentExecutions", 0))
    unreserved = int(settings.get("UnreservedConcurrentExecutions", limit))
    headroom = max(0, unreserved - LAMBDA_MIN_UNRESERVED)
    text = f"account limit {limit}, unreserved {unreserved}: up to {headroom} can be reserved"
    fix = (
        f"deploy with `-c {PARSE_RESERVED_CONTEXT}=0` (cdk.json), or ask for a higher 'Concurrent "
        "executions' quota (Service Quotas, AWS Lambda)"
    )
    if wanted > headroom:
        return Check(
            name,
            "fail",
            f"{text}; {PARSE_RESERVED_CONTEXT}={wanted} would make `cdk deploy` fail "
            f"(Lambda keeps {LAMBDA_MIN_UNRESERVED} unreserved)",
            fix,
        )
    if limit < 2 * LAMBDA_MIN_UNRESERVED:
        return Check(
            name,
            "warn",
            f"{text}; a low limit: sweeps of many concurrent jobs throttle ParseRun (its calls are retried)",
            "ask for a higher 'Concurrent executions' quota (Service Quotas, AWS Lambda)",
        )
    return Check(name, "ok", text + (f"; {PARSE_RESERVED_CONTEXT}={wanted}" if wanted else ""))


def check_account_for_spec(session: Any, stack: str, spec: Any | None, cfg: Any) -> list[Check]:
    """Training quotas and prices of the spec's instance types (without a spec: common GPU types)."""
    from trainsweep.instances import LOCAL_CPU, LOCAL_GPU

    types = (
        [t for t in spec.instance_types if t not in (LOCAL_CPU, LOCAL_GPU)]
        if spec is not None
        else list(COMMON_TYPES)
    )
    if not types:
        return [Check("instance types", "info", "the spec runs in local mode: no quota or price to check")]
    return [check_quotas(session, spec, types, cfg), check_prices(session, stack, spec, types, cfg)]


def check_quotas(session: Any, spec: Any | None, types: list[str], cfg: Any) -> Check:
    """The account's training quota of each type: a type the sweep cannot start one job on fails."""
    from trainsweep.aws.quotas import training_instance_quotas

    spot = bool(spec is not None and spec.spot)
    need = spec.instance_count if spec is not None else 1
    name = f"{'spot ' if spot else ''}training quotas"
    try:
        quotas = training_instance_quotas(session.client("service-quotas", config=cfg), types, spot=spot)
    except Exception as exc:
        return Check(name, "info", f"not readable: {str(exc)[:80]}")
    readable = {t: q for t, q in quotas.items() if q is not None}
    if not readable:
        return Check(name, "info", "not readable (servicequotas:ListServiceQuotas); not required")
    short = [t for t, q in readable.items() if q < need]
    text = ", ".join(f"{t}={q}" for t, q in readable.items())
    unread = [t for t in types if quotas[t] is None]
    if unread:
        text += f"; not listed: {', '.join(unread)}"
    if not short:
        return Check(name, "ok", text)
    fix = (
        f"request {need}+ for {', '.join(short)} in the Service Quotas console (Amazon SageMaker, "
        f"'<type> for {'spot ' if spot else ''}training job usage'); new accounts start at 0 for "
        "most GPU types"
    )
    return Check(name, "fail" if spec is not None else "warn", text, fix)


def check_prices(session: Any, stack: str, spec: Any | None, types: list[str], cfg: Any) -> Check:
    """Whether the region has a price for each type, as PlanSweep finds them (the spec's ``prices``, the
    stack's cache, the Pricing API, the shipped catalogue); unpriced types fail a spec with a budget."""
    from trainsweep.aws.pricing import stack_price_fn
    from trainsweep.cost.prices import PRICING_API_REGION

    region = session.region_name
    given = spec.prices if spec is not None else {}
    from trainsweep.aws import outputs, sweeps

    try:
        bucket = sweeps.pick_output(
            sweeps.stack_outputs(session.client("cloudformation", config=cfg), stack), outputs.BUCKET_NAME
        )
    except Exception:  # no stack: the Pricing API and the shipped catalogue still answer
        bucket = None
    try:
        price = stack_price_fn(
            session.client("s3", config=cfg),
            bucket,
            session.client("pricing", region_name=PRICING_API_REGION, config=cfg),
            region,
            [t for t in types if t not in given],
        )
    except Exception as exc:
        return Check("prices", "info", f"not checked: {str(exc)[:80]}")
    known = {t: given.get(t) or price(t, region) for t in types}
    unpriced = [t for t, p in known.items() if p is None]
    text = ", ".join(f"{t}={p:.3f} USD/h" for t, p in known.items() if p is not None)
    if not unpriced:
        return Check("prices", "ok", f"{region}: {text}")
    example = ", ".join(f"{t}: <USD per hour>" for t in unpriced)
    fix = f"add `prices: {{{example}}}` to the spec, or run `trainsweep prices refresh --region {region}`"
    budget = spec is not None and spec.budget_usd is not None
    detail = f"no price for {', '.join(unpriced)} in {region}" + (
        " (budget_usd cannot be checked: the sweep is refused)" if budget else " (no cost figures for them)"
    )
    return Check("prices", "fail" if budget else "warn", detail + (f"; {text}" if text else ""), fix)


def run_checks(
    *,
    stack: str,
    profile: str | None = None,
    region: str | None = None,
    which: Callable[[str], str | None] = shutil.which,
    run: Runner = _run,
    session: Any | None = None,
    spec: Any | None = None,
) -> list[Check]:
    """Every check, in the order ``doctor`` prints them; ``spec`` a loaded sweep spec, or None."""
    checks = [
        check_python(),
        *check_packages(),
        check_node(which, run),
        check_cdk_cli(which, run),
        check_gpu(which, run),
        check_log_scanner(),
        check_bytecode(),
    ]
    if session is None:
        try:
            import boto3

            from trainsweep.aws.region import resolve_region

            spec_region = spec.region if spec is not None else None
            choice = resolve_region(region, spec_region=spec_region, profile=profile)
            session = cast(Any, boto3.Session(profile_name=profile, region_name=choice.region))
            session.region_source = choice.source
        except Exception as exc:
            checks.append(Check("AWS profile", "fail", str(exc), "aws configure list-profiles"))
            return checks
    checks += check_aws(session, stack, spec)
    return checks
