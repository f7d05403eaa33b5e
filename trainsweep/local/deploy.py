"""Synthesize the CDK app and deploy its template into the embedded AWS with CloudFormation.

What ``cdk deploy`` does, done with boto3 against moto: synthesize (``python app.py``; asset bundling
skipped, because local Lambdas run from source), publish the file assets to the bootstrap bucket named
in the asset manifest, create the CDK bootstrap version parameter the template checks, then
``CreateStack`` and read the outputs. Custom resources that CDK backs with its own Node.js/inline
Lambdas are done natively (S3 bucket notifications) instead of by running those Lambdas.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import uuid
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainsweep.errors import LocalModeError, TrainsweepError
from trainsweep.local.patching import Patches
from trainsweep.local.workroot import Workroot
from trainsweep.parentdeath import dying_with_parent

SYNTH_PREFIX = "trainsweep-synth-"

PROJECT_ROOT = Path(__file__).resolve().parents[2]
ACCOUNT_ID = "123456789012"
BOOTSTRAP_VERSION_PARAMETER = "/cdk-bootstrap/hnb659fds/version"
BOOTSTRAP_VERSION = "30"
SYNTH_CACHE_KEEP = 4
SYNTH_CACHE_ENV = "TRAINSWEEP_SYNTH_CACHE"  # folder for synthesized assemblies ("" disables the cache)
# Sources whose change invalidates a cached synth (the stack, its assets, and the package it imports).
_SYNTH_INPUTS = ("app.py", "cdk.json", "package.json", "infra", "lambdas", "container", "trainsweep")


@dataclass
class StackArtifact:
    name: str
    template: dict[str, Any]
    assets: dict[str, Any]  # the asset manifest (files, dockerImages)
    assembly_dir: Path


@dataclass
class DeployedStack:
    name: str
    outputs: dict[str, str]
    timings: dict[str, float] = field(default_factory=dict)

    def output(self, *candidates: str) -> str:
        """The first output whose key equals, or else contains, one of the candidates (case-insensitive)."""
        from trainsweep.aws.sweeps import pick_output

        try:
            return pick_output(self.outputs, *candidates)
        except TrainsweepError as e:
            raise LocalModeError(f"stack {self.name}: {e}") from None


# ---- synth ----------------------------------------------------------------------------------------


def _synth_digest(root: Path) -> str:
    h = hashlib.sha256()
    for rel in _SYNTH_INPUTS:
        p = root / rel
        files = sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else ([p] if p.is_file() else [])
        for f in files:
            if "__pycache__" in f.parts or f.suffix == ".pyc":
                continue
            h.update(str(f.relative_to(root)).encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:20]


def _cache_root() -> Path | None:
    configured = os.environ.get(SYNTH_CACHE_ENV)
    if configured == "":
        return None
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "trainsweep" / "synth"


def synthesize(root: Path = PROJECT_ROOT, *, region: str = "us-east-1", use_cache: bool = True) -> Path:
    """Run ``python app.py`` into a cloud assembly folder and return it (cached by the sources' digest)."""
    app = root / "app.py"
    if not app.is_file():
        raise LocalModeError(f"no CDK app at {app}: local mode deploys the project's own stack")
    cache = _cache_root() if use_cache else None
    target: Path | None = None
    if cache is not None:
        target = cache / f"{_synth_digest(root)}-{region}"
        if (target / "manifest.json").is_file():
            os.utime(target)  # recently used: pruning keeps it
            return target
    held = Workroot(prefix=SYNTH_PREFIX)  # removed by a later run if this process is killed
    outdir = held.path
    env = dict(os.environ)
    env.update(
        {
            "CDK_OUTDIR": str(outdir),
            "CDK_CONTEXT_JSON": json.dumps({"aws:cdk:bundling-stacks": []}),
            "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": env.get(
                "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20"
            ),
        }
    )
    # An environment-agnostic stack, as `cdk synth` without credentials makes it: the embedded AWS
    # resolves the account and region pseudo parameters at deploy time.
    for k in ("AWS_ENDPOINT_URL", "CDK_DEFAULT_ACCOUNT", "CDK_DEFAULT_REGION"):
        env.pop(k, None)
    proc = subprocess.run(  # this thread waits for it: it dies with a killed run
        dying_with_parent([sys.executable, str(app)], env=env),
        cwd=root, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if proc.returncode != 0 or not (outdir / "manifest.json").is_file():
        held.remove()
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
        raise LocalModeError(f"synthesizing the CDK app failed (python app.py):\n{tail}")
    held.disown()
    if target is None:
        return outdir
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.with_name(target.name + f".{uuid.uuid4().hex[:8]}")
    shutil.move(str(outdir), staging)
    try:
        staging.rename(target)
    except OSError:  # another run cached it first
        shutil.rmtree(staging, ignore_errors=True)
    _prune(target.parent)
    return target


def _prune(cache: Path, keep: int = SYNTH_CACHE_KEEP) -> None:
    """Keep the newest ``keep`` cached assemblies (each source change makes a new one)."""
    entries = sorted(
        (p for p in cache.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime, reverse=True
    )
    for old in entries[keep:]:
        shutil.rmtree(old, ignore_errors=True)


def read_stacks(assembly: Path) -> list[StackArtifact]:
    """The CloudFormation stacks of a cloud assembly, with their asset manifests."""
    manifest = json.loads((assembly / "manifest.json").read_text())
    artifacts = manifest.get("artifacts", {})
    stacks = []
    for name, art in artifacts.items():
        if art.get("type") != "aws:cloudformation:stack":
            continue
        props = art.get("properties", {})
        template = json.loads((assembly / props["templateFile"]).read_text())
        assets: dict[str, Any] = {}
        for dep in art.get("dependencies", []):
            dep_art = artifacts.get(dep, {})
            if dep_art.get("type") == "cdk:asset-manifest":
                assets = json.loads((assembly / dep_art["properties"]["file"]).read_text())
        stacks.append(StackArtifact(props.get("stackName", name), template, assets, assembly))
    if not stacks:
        raise LocalModeError(f"the cloud assembly {assembly} holds no stack")
    return stacks


# ---- assets ---------------------------------------------------------------------------------------


def _placeholders(text: str, region: str) -> str:
    return (
        text.replace("${AWS::AccountId}", ACCOUNT_ID)
        .replace("${AWS::Region}", region)
        .replace("${AWS::Partition}", "aws")
        .replace("${AWS::URLSuffix}", "amazonaws.com")
    )


def _zip_dir(path: Path) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        for f in sorted(path.rglob("*")):
            if f.is_file() and "__pycache__" not in f.parts:
                zf.write(f, f.relative_to(path).as_posix())
    return buf.getvalue()


def publish_assets(stack: StackArtifact, s3: Any, region: str) -> int:
    """Upload the stack's file assets where its template expects them; returns the number uploaded."""
    count = 0
    known: set[str] = set()
    for asset in stack.assets.get("files", {}).values():
        source = asset.get("source", {})
        path = stack.assembly_dir / source.get("path", "")
        body = _zip_dir(path) if source.get("packaging") == "zip" or path.is_dir() else path.read_bytes()
        for dest in asset.get("destinations", {}).values():
            bucket = _placeholders(dest["bucketName"], region)
            if bucket not in known:
                try:
                    s3.head_bucket(Bucket=bucket)
                except Exception:
                    s3.create_bucket(Bucket=bucket)
                known.add(bucket)
            s3.put_object(Bucket=bucket, Key=_placeholders(dest["objectKey"], region), Body=body)
            count += 1
    return count


# ---- custom resources -----------------------------------------------------------------------------


def _stringify(value: Any) -> Any:
    """CloudFormation hands custom resources every scalar as a string; moto keeps JSON types."""
    if isinstance(value, dict):
        return {k: _stringify(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_stringify(v) for v in value]
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return value


class CustomResources:
    """Create custom resources during CreateStack without running CDK's framework Lambdas."""

    def __init__(self, *, response_token: str = "") -> None:
        self._patches = Patches()
        self._response_token = response_token  # the embedded AWS takes unsigned answers with it only
        self.bucket_notifications: list[dict[str, Any]] = []
        self.invoked: list[str] = []
        self.failures: list[str] = []
        self._lock = threading.Lock()

    def install(self) -> None:
        from moto.cloudformation.custom_model import CustomModel

        resources = self

        def create_from_cloudformation_json(
            cls: Any,
            resource_name: str,
            cloudformation_json: dict[str, Any],
            account_id: str,
            region_name: str,
            **kwargs: Any,
        ) -> Any:
            return resources._create(
                cls, resource_name, cloudformation_json, account_id, region_name, **kwargs
            )

        self._patches.set(
            CustomModel, "create_from_cloudformation_json", classmethod(create_from_cloudformation_json)
        )

    def restore(self) -> None:
        self._patches.restore()

    def _create(
        self, cls: Any, resource_name: str, cfn: dict[str, Any], account_id: str, region: str, **kwargs: Any
    ) -> Any:
        from moto.cloudformation import cloudformation_backends

        props = cfn.get("Properties", {})
        rtype = kwargs["ResourceType"]
        model = cls(region, str(uuid.uuid4()), kwargs["LogicalId"], resource_name)
        stack = cloudformation_backends[account_id][region].get_stack(kwargs["StackId"])
        stack.add_custom_resource(model)
        if rtype == "Custom::S3BucketNotifications":
            with self._lock:
                self.bucket_notifications.append(props)
            model.set_data({})
        elif rtype in ("Custom::S3AutoDeleteObjects", "Custom::CDKBucketDeployment"):
            model.set_data({})  # acts on stack deletion / copies nothing locally
        else:
            self._invoke(model, props, rtype, account_id, region, kwargs)
        return model

    def _invoke(
        self, model: Any, props: dict[str, Any], rtype: str, account_id: str, region: str, kw: dict[str, Any]
    ) -> None:
        """Run the provider function in the background, as CloudFormation does: it answers by PUTting to
        the ResponseURL (moto's cfnresponse endpoint), which completes the resource and the stack."""
        from moto import settings
        from moto.awslambda.utils import get_backend

        from trainsweep.local.access import CFN_RESPONSE_TOKEN

        function = get_backend(account_id, region).get_function(props["ServiceToken"])
        response_url = (
            f"http://localhost:{settings.moto_server_port()}/cloudformation_{region}/cfnresponse"
            f"?stack={kw['StackId']}&{CFN_RESPONSE_TOKEN}={self._response_token}"
        )
        event = {
            "RequestType": "Create",
            "ServiceToken": props["ServiceToken"],
            "ResponseURL": response_url,
            "StackId": kw["StackId"],
            "RequestId": model.request_id,
            "LogicalResourceId": kw["LogicalId"],
            "ResourceType": rtype,
            "ResourceProperties": _stringify(props),
        }

        def run() -> None:
            headers: dict[str, str] = {}
            try:
                result = function.invoke(json.dumps(event), {}, headers)
            except Exception as exc:
                result, headers["x-amz-function-error"] = repr(exc), "Unhandled"
            if "x-amz-function-error" in headers:
                with self._lock:
                    self.failures.append(f"custom resource {kw['LogicalId']} ({rtype}) failed: {result!r}")
            elif not model.is_created():
                with self._lock:
                    self.failures.append(
                        f"custom resource {kw['LogicalId']} ({rtype}) returned without answering "
                        "CloudFormation"
                    )

        with self._lock:
            self.invoked.append(kw["LogicalId"])
        threading.Thread(target=run, name=f"custom-resource-{kw['LogicalId']}", daemon=True).start()

    def apply_bucket_notifications(self, s3: Any) -> int:
        """Put the notification configurations CDK's handler would have put (after CreateStack)."""
        for props in self.bucket_notifications:
            config = props.get("NotificationConfiguration") or {}
            config = {k: v for k, v in config.items() if k in _NOTIFICATION_KEYS and v}
            s3.put_bucket_notification_configuration(
                Bucket=props["BucketName"], NotificationConfiguration=config
            )
        return len(self.bucket_notifications)


_NOTIFICATION_KEYS = (
    "LambdaFunctionConfigurations",
    "QueueConfigurations",
    "TopicConfigurations",
    "EventBridgeConfiguration",
)


def apply_event_invoke_configs(
    template: dict[str, Any], stack_name: str, *, cfn: Any, lambda_: Any, sqs: Any
) -> int:
    """Put the ``AWS::Lambda::EventInvokeConfig`` resources of ``template`` (moto's CloudFormation skips
    them) on their functions, so that local notifications know where a failed event goes."""
    configs = {
        lid: r["Properties"]
        for lid, r in template.get("Resources", {}).items()
        if r.get("Type") == "AWS::Lambda::EventInvokeConfig"
    }
    if not configs:
        return 0
    physical = {
        r["LogicalResourceId"]: r["PhysicalResourceId"]
        for r in cfn.describe_stack_resources(StackName=stack_name)["StackResources"]
        if "LogicalResourceId" in r and "PhysicalResourceId" in r  # moto lists skipped types bare
    }

    def resolve(value: Any) -> str:
        if isinstance(value, dict) and "Ref" in value:
            return physical[value["Ref"]]
        if isinstance(value, dict) and value.get("Fn::GetAtt", [None, None])[1] == "Arn":
            ref = physical[value["Fn::GetAtt"][0]]  # a queue's physical id is its URL
            if ref.startswith("arn:"):
                return ref
            return sqs.get_queue_attributes(QueueUrl=ref, AttributeNames=["QueueArn"])["Attributes"][
                "QueueArn"
            ]
        if isinstance(value, str):
            return value
        raise LocalModeError(f"cannot resolve {value!r} of an EventInvokeConfig in the embedded AWS")

    for props in configs.values():
        destinations = {
            when: {"Destination": resolve(d["Destination"])}
            for when, d in (props.get("DestinationConfig") or {}).items()
        }
        extra: dict[str, Any] = {}
        for key in ("MaximumRetryAttempts", "MaximumEventAgeInSeconds"):
            if key in props:
                extra[key] = int(props[key])
        lambda_.put_function_event_invoke_config(
            FunctionName=resolve(props["FunctionName"]), DestinationConfig=destinations, **extra
        )
    return len(configs)


# ---- deploy ---------------------------------------------------------------------------------------


def deploy_stack(
    stack: StackArtifact,
    *,
    cfn: Any,
    s3: Any,
    ssm: Any,
    region: str,
    custom_resources: CustomResources,
    stack_name: str | None = None,
    lambda_: Any = None,
    sqs: Any = None,
) -> DeployedStack:
    """Publish assets, create the stack, wait for it, apply deferred notifications (and, given the
    ``lambda_`` and ``sqs`` clients, the functions' asynchronous-invocation settings), return the outputs."""
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    publish_assets(stack, s3, region)
    ssm.put_parameter(
        Name=BOOTSTRAP_VERSION_PARAMETER, Value=BOOTSTRAP_VERSION, Type="String", Overwrite=True
    )
    timings["assets"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    name = stack_name or stack.name
    body = json.dumps(stack.template)
    cfn.create_stack(
        StackName=name,
        TemplateBody=body,
        Capabilities=["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM", "CAPABILITY_AUTO_EXPAND"],
    )
    deadline = time.monotonic() + 120
    while True:
        described = cfn.describe_stacks(StackName=name)["Stacks"][0]
        status = described["StackStatus"]
        if status.endswith("_COMPLETE") and "ROLLBACK" not in status:
            break
        if custom_resources.failures:
            raise LocalModeError(
                f"deploying {name} into the embedded AWS failed: {custom_resources.failures[0]}"
            )
        if status.endswith("FAILED") or "ROLLBACK" in status or time.monotonic() > deadline:
            events = cfn.describe_stack_events(StackName=name).get("StackEvents", [])
            reasons = [e.get("ResourceStatusReason") for e in events if e.get("ResourceStatusReason")]
            raise LocalModeError(f"deploying {name} into the embedded AWS ended {status}: {reasons[:5]}")
        time.sleep(0.1)
    custom_resources.apply_bucket_notifications(s3)
    if lambda_ is not None and sqs is not None:
        apply_event_invoke_configs(stack.template, name, cfn=cfn, lambda_=lambda_, sqs=sqs)
    timings["create_stack"] = time.perf_counter() - t0
    outputs = {o["OutputKey"]: o["OutputValue"] for o in described.get("Outputs", [])}
    return DeployedStack(name, outputs, timings)
