"""Python Lambda functions built from ``lambdas/<name>/`` plus the ``trainsweep`` package, without Docker.

Bundling runs on the synthesising machine (:class:`LocalPipBundling`): pip installs exactly the
function's ``requirements.lock`` (made by ``scripts/lock`` from its ``requirements.txt``: every package
pinned with its hashes, no dependency resolved at build time) as manylinux wheels for the Lambda runtime
into the asset, then the handler and the ``trainsweep`` package (minus the CLI and local mode) are
copied in. The asset hash is computed from those sources and the lock, so a change to the core or to
any locked dependency redeploys the function, and the same commit always gives the same hash.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jsii
from aws_cdk import AssetHashType, BundlingOptions, DockerImage, Duration, ILocalBundling, RemovalPolicy
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from trainsweep.aws.config import BUCKET_ENV
from trainsweep.local.lambda_runner import FUNCTION_ENV

ROOT = Path(__file__).resolve().parents[1]
LAMBDAS = ROOT / "lambdas"
PACKAGE = ROOT / "trainsweep"
RUNTIME = lambda_.Runtime.PYTHON_3_12
PYTHON_VERSION = "3.12"
PLATFORMS = ("manylinux2014_x86_64", "manylinux_2_28_x86_64")
# Parts of the package no Lambda imports (the CLI needs typer/rich, local mode needs moto).
PACKAGE_EXCLUDE = ("cli", "local")
# Removed from installed dependencies: never imported at run time, and they count against the 250 MB.
PRUNE_DIRS = ("__pycache__", "tests", "test", "testing")
PRUNE_GLOBS = ("*.pyc", "*.pyi")
# Not copied from the package: the optional C log scanner (its source, and a build made for this machine's
# Python, which is not the Lambda runtime's); the functions read logs with the Python path.
PACKAGE_SKIP_SUFFIXES = (".pyc", ".c", ".so")


def _package_files(root: Path) -> list[Path]:
    files = []
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root)
        if p.is_dir() or "__pycache__" in rel.parts or p.suffix in PACKAGE_SKIP_SUFFIXES:
            continue
        if rel.parts[0] in PACKAGE_EXCLUDE:
            continue
        files.append(p)
    return files


LOCK_NAME = "requirements.lock"
_LOCK_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")


class BundleMismatchError(RuntimeError):
    """A bundle's installed packages are not the ones its lock names."""


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def locked_packages(lock: Path) -> dict[str, str]:
    """``{name: version}`` pinned by a lock file written by ``scripts/lock`` (names normalised)."""
    pins = {}
    for line in lock.read_text().splitlines():
        m = _LOCK_PIN.match(line)
        if m:
            pins[_normalise(m.group(1))] = m.group(2)
    return pins


def installed_packages(target: Path) -> dict[str, str]:
    """``{name: version}`` of the distributions ``pip install --target`` put into ``target``."""
    found = {}
    for meta in sorted(target.glob("*.dist-info/METADATA")):
        fields = dict(
            line.split(": ", 1) for line in meta.read_text(errors="replace").splitlines()[:20] if ": " in line
        )
        found[_normalise(fields["Name"])] = fields["Version"]
    return found


def source_hash(name: str) -> str:
    """Hash of everything that goes into a function's asset.

    The handler folder (its ``requirements.lock`` included: the pins and hashes that name the
    dependencies' bytes), the package, the runtime and the wheel platforms the lock is installed for.
    """
    h = hashlib.sha256()
    for base in (LAMBDAS / name, PACKAGE):
        for p in _package_files(base) if base == PACKAGE else sorted(base.rglob("*")):
            if p.is_file() and "__pycache__" not in p.parts:
                h.update(str(p.relative_to(ROOT)).encode())
                h.update(p.read_bytes())
    h.update(RUNTIME.name.encode())
    h.update(" ".join((PYTHON_VERSION, *PLATFORMS)).encode())
    return h.hexdigest()


def install_locked(lock: Path, out: Path) -> None:
    """Install exactly the packages of ``lock`` into ``out`` for the Lambda runtime; check what landed."""
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    cmd += ["--target", str(out), "--only-binary=:all:", "--implementation", "cp"]
    cmd += ["--python-version", PYTHON_VERSION, "--no-deps", "--require-hashes", "-r", str(lock)]
    for platform in PLATFORMS:
        cmd += ["--platform", platform]
    subprocess.run(cmd, check=True)
    wanted, got = locked_packages(lock), installed_packages(out)
    if got != wanted:
        differ = sorted(set(wanted.items()) ^ set(got.items()))
        raise BundleMismatchError(f"{out}: installed packages differ from {lock}: {differ}")


def build_asset(name: str, out: Path) -> None:
    """Fill ``out`` with the function ``name``: locked dependencies, handler, the trainsweep package."""
    lock = LAMBDAS / name / LOCK_NAME
    if (LAMBDAS / name / "requirements.txt").is_file():
        if not lock.is_file():
            raise FileNotFoundError(f"{lock} is missing: run scripts/lock")
        install_locked(lock, out)
    for p in sorted((LAMBDAS / name).iterdir()):
        if p.is_file() and p.suffix == ".py":
            shutil.copy2(p, out / p.name)
    for p in _package_files(PACKAGE):
        dest = out / "trainsweep" / p.relative_to(PACKAGE)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(p, dest)
    for d in sorted(out.rglob("*"), reverse=True):
        if d.is_dir() and d.name in PRUNE_DIRS and d.parent != out / "trainsweep":
            shutil.rmtree(d, ignore_errors=True)
    for pattern in PRUNE_GLOBS:
        for f in out.rglob(pattern):
            f.unlink(missing_ok=True)


@jsii.implements(ILocalBundling)
class LocalPipBundling:
    """Bundles a function on this machine (pip cross-installs manylinux wheels); no Docker needed."""

    def __init__(self, name: str):
        self.name = name

    def try_bundle(self, output_dir: str, *_options: object, **_keywords: object) -> bool:
        # jsii passes the BundlingOptions positionally; nothing in them changes a local build.
        build_asset(self.name, Path(output_dir))
        return True


def function_code(name: str) -> lambda_.Code:
    """The asset of ``lambdas/<name>``, bundled locally (Docker only as CDK's fallback, never needed)."""
    return lambda_.Code.from_asset(
        str(LAMBDAS / name),
        asset_hash_type=AssetHashType.CUSTOM,
        asset_hash=source_hash(name),
        bundling=BundlingOptions(
            image=DockerImage.from_registry(f"public.ecr.aws/sam/build-python{PYTHON_VERSION}"),
            local=LocalPipBundling(name),
            command=["bash", "-c", "echo 'trainsweep bundles locally' && exit 1"],
        ),
    )


class HandlerFunction(Construct):
    """One ``lambdas/<name>/handler.py`` as a Lambda function with its own log group.

    The function knows the results bucket's name (``TRAINSWEEP_BUCKET``) and its own folder name
    (``TRAINSWEEP_FUNCTION``, which local mode uses to run it from source). Grants are the stack's job.
    ``reserved_concurrency`` sets aside that many concurrent executions of the account's pool for the
    function alone (and caps it there); None or 0: none reserved.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        bucket_name: str,
        memory_mb: int = 512,
        timeout: Duration | None = None,
        environment: dict[str, str] | None = None,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH,
        reserved_concurrency: int | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.log_group = logs.LogGroup(
            self, "Logs", retention=log_retention, removal_policy=RemovalPolicy.DESTROY
        )
        self.function = lambda_.Function(
            self,
            "Function",
            runtime=RUNTIME,
            architecture=lambda_.Architecture.X86_64,
            handler="handler.handler",
            code=function_code(name),
            memory_size=memory_mb,
            timeout=timeout or Duration.minutes(5),
            log_group=self.log_group,
            tracing=lambda_.Tracing.ACTIVE,
            reserved_concurrent_executions=reserved_concurrency or None,
            environment={
                BUCKET_ENV: bucket_name,
                FUNCTION_ENV: name,
                "POWERTOOLS_SERVICE_NAME": "trainsweep",
                "MPLBACKEND": "Agg",
                "MPLCONFIGDIR": "/tmp/matplotlib",
                **(environment or {}),
            },
        )
