"""What AWS would say to the requests the stack makes: botocore's own service models, not our reading of them.

The synthesized definition's training tasks are rendered into the ``CreateTrainingJob`` requests Step
Functions would send, for every job PlanSweep plans from every example spec (a local example moved to a
cloud type), in several regions, and each request is checked with botocore's ``ParamValidator`` (types,
required members, minimums) and then with what it leaves out: the model's ``pattern``, ``max`` and
``enum`` (job-name pattern and length, hyperparameter count and value length, the instance-type enum),
plus SageMaker's rule that a spot job's wait is at least its runtime. The template's IAM actions are
checked against the operations of botocore's models, so a misspelt action is caught.

This is the check that found what issue 13 fixed (``local`` types reaching SageMaker, a K80 type the image
cannot use, missing permissions); it stays.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import botocore.session
import pytest
import yaml
from botocore.model import Shape
from botocore.validate import ParamValidator

from tests.infra.synth_helpers import ROOT, as_list, resources, states_by_name
from trainsweep import image
from trainsweep.aws.workflow import state_input, with_default_image
from trainsweep.spec import LOCAL_TYPES, plan_sweep

ACCOUNT = "123456789012"
REGIONS = ["us-east-1", "eu-west-1", "ap-southeast-2"]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml")) + sorted((ROOT / "examples").glob("byo-*/*.yaml"))
CLOUD_STAND_IN = "ml.g4dn.xlarge"  # where a local example goes when it is moved to the cloud

_session = botocore.session.get_session()
SAGEMAKER = _session.get_service_model("sagemaker")
CREATE_TRAINING_JOB = SAGEMAKER.operation_model("CreateTrainingJob").input_shape


# ---- the template, resolved as CloudFormation would in one region ----------------------------------------


def _fake_arn(template: dict[str, Any], logical_id: str, region: str) -> str:
    kind = template["Resources"][logical_id]["Type"]
    return {
        "AWS::IAM::Role": f"arn:aws:iam::{ACCOUNT}:role/Trainsweep-{logical_id[:40]}",
        "AWS::KMS::Key": f"arn:aws:kms:{region}:{ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab",
        "AWS::Lambda::Function": f"arn:aws:lambda:{region}:{ACCOUNT}:function:Trainsweep-{logical_id[:40]}",
        "AWS::SNS::Topic": f"arn:aws:sns:{region}:{ACCOUNT}:Trainsweep-{logical_id[:40]}",
    }.get(kind, f"arn:aws:unknown:{region}:{ACCOUNT}:{logical_id}")


def _resolve(value: Any, template: dict[str, Any], region: str) -> Any:
    if isinstance(value, list):
        return [_resolve(v, template, region) for v in value]
    if not isinstance(value, dict):
        return value
    if "Fn::Join" in value:
        sep, parts = value["Fn::Join"]
        return sep.join(str(_resolve(p, template, region)) for p in parts)
    if "Ref" in value:
        pseudo = {
            "AWS::Region": region,
            "AWS::Partition": "aws",
            "AWS::AccountId": ACCOUNT,
            "AWS::URLSuffix": "amazonaws.com",
        }
        return pseudo.get(value["Ref"], f"trainsweep-{value['Ref'].lower()[:40]}")
    if "Fn::GetAtt" in value:
        return _fake_arn(template, value["Fn::GetAtt"][0], region)
    if "Fn::Sub" in value:
        text = value["Fn::Sub"]
        return (
            text.replace("${AWS::Region}", region)
            .replace("${AWS::AccountId}", ACCOUNT)
            .replace("${AWS::Partition}", "aws")
            .replace("${AWS::URLSuffix}", "amazonaws.com")
        )
    return {k: _resolve(v, template, region) for k, v in value.items()}


def _states(template: dict[str, Any], region: str) -> dict[str, dict[str, Any]]:
    (sm,) = resources(template, "AWS::StepFunctions::StateMachine").values()
    definition = json.loads(_resolve(sm["Properties"]["DefinitionString"], template, region))
    return states_by_name(definition)


def _path(data: Any, path: str) -> Any:
    assert path.startswith("$."), path
    for part in path[2:].split("."):
        if not isinstance(data, dict) or part not in data:
            raise KeyError(f"{path}: no {part!r} in the state (the task would fail with States.Runtime)")
        data = data[part]
    return data


def _render(params: Any, state: dict[str, Any]) -> Any:
    """Step Functions' Parameters: a key ending in ``.$`` takes the value at its JSONPath."""
    if isinstance(params, list):
        return [_render(p, state) for p in params]
    if not isinstance(params, dict):
        return params
    out = {}
    for key, value in params.items():
        if key.endswith(".$"):
            out[key[:-2]] = _path(state, value)
        else:
            out[key] = _render(value, state)
    return out


def _holds(rule: dict[str, Any], state: dict[str, Any]) -> bool:
    """A Choice rule of the operators the training-kind choice uses, evaluated on ``state``."""
    if "And" in rule:
        return all(_holds(r, state) for r in rule["And"])
    if "Not" in rule:
        return not _holds(rule["Not"], state)
    try:
        value = _path(state, rule["Variable"])
    except KeyError:
        return rule.get("IsPresent") is False
    if "IsPresent" in rule:
        return bool(rule["IsPresent"])
    if "IsString" in rule:
        return isinstance(value, str) == rule["IsString"]
    if "BooleanEquals" in rule:
        return value is rule["BooleanEquals"]
    raise AssertionError(f"a Choice operator this test does not evaluate: {rule}")


def _training_state(states: dict[str, dict[str, Any]], state: dict[str, Any]) -> str:
    """The training task the ``TrainingKind`` Choice sends ``state`` to, as Step Functions would."""
    choice = states["TrainingKind"]
    return next((r["Next"] for r in choice["Choices"] if _holds(r, state)), choice["Default"])


# ---- the requests ----------------------------------------------------------------------------------------


def _spec(path: Path) -> dict[str, Any]:
    spec = yaml.safe_load(path.read_text())
    if all(t in LOCAL_TYPES for t in spec["instance_types"]):
        spec["instance_types"] = [CLOUD_STAND_IN]
    if spec["workload"].get("entry_point"):
        spec["workload"]["source_dir"] = (
            "s3://trainsweep-results/sweeps/x/code/sourcedir.tar.gz"  # `run` uploads
        )
    if str(spec.get("data", "")).startswith("file://"):
        spec["data"] = "s3://my-training-data/mnist/"
    return spec


def _requests(template: dict[str, Any], path: Path, region: str) -> list[dict[str, Any]]:
    states = _states(template, region)
    bucket = f"trainsweep-results-{region}"
    plan = plan_sweep(_spec(path), region=region, bucket=bucket, enforce_budget=False, cloud=True)
    stack_image = (
        f"{ACCOUNT}.dkr.ecr.{region}.amazonaws.com/cdk-hnb659fds-container-assets-{ACCOUNT}-{region}:0123abcd"
    )
    plan.jobs = with_default_image(plan.jobs, lambda: stack_image)
    out = []
    for jobs in state_input(plan.to_state_input()).items.values():  # what each Distributed Map reads
        for job in jobs:
            name = "Train" + ("Spot" if job.spot else "") + ("WithData" if job.data_s3_uri else "")
            name += "InVpc" if job.vpc_config is not None else ""
            name += "WithMlflow" if job.mlflow_config is not None else ""
            state = {"sweep_id": plan.sweep_id, "job": job.to_json(), "outcome": {}}
            assert _training_state(states, state) == name  # the definition's Choice picks it
            task = states[name]
            assert task["Resource"] == "arn:aws:states:::sagemaker:createTrainingJob.sync"
            out.append(_render(task["Parameters"], state))
    assert out
    return out


def _java_pattern(pattern: str) -> re.Pattern[str]:
    # The models' patterns are Java regexes; Python's re lacks \p{..}: near-enough classes, wider, never
    # narrower.
    for java, python in (("\\p{L}", "\\w"), ("\\p{N}", "\\d"), ("\\p{Z}", "\\s"), ("\\p{M}", "\\w")):
        pattern = pattern.replace(java, python)
    return re.compile(pattern, re.S)


def model_problems(value: Any, shape: Shape, where: str = "") -> list[str]:
    """What ParamValidator does not check: ``pattern``, ``max`` (length, entries, value), ``enum``."""
    meta = shape.metadata
    problems = []
    if shape.type_name == "structure":
        for name, member in shape.members.items():
            if name in value:
                problems += model_problems(value[name], member, f"{where}.{name}".lstrip("."))
        return problems
    if shape.type_name == "list":
        if "max" in meta and len(value) > meta["max"]:
            problems.append(f"{where}: {len(value)} items, at most {meta['max']}")
        for i, item in enumerate(value):
            problems += model_problems(item, shape.member, f"{where}[{i}]")
        return problems
    if shape.type_name == "map":
        if "max" in meta and len(value) > meta["max"]:
            problems.append(f"{where}: {len(value)} entries, at most {meta['max']}")
        for k, v in value.items():
            problems += model_problems(k, shape.key, f"{where} key {k!r}")
            problems += model_problems(v, shape.value, f"{where}[{k!r}]")
        return problems
    if shape.type_name == "string":
        if "max" in meta and len(value) > meta["max"]:
            problems.append(f"{where}: {len(value)} characters, at most {meta['max']}")
        if "pattern" in meta and not _java_pattern(meta["pattern"]).fullmatch(value):
            problems.append(f"{where}: {value!r} does not match {meta['pattern']!r}")
        if "enum" in meta and value not in meta["enum"]:
            problems.append(
                f"{where}: {value!r} is not one of the {len(meta['enum'])} values SageMaker knows"
            )
    if shape.type_name in ("integer", "long") and "max" in meta and value > meta["max"]:
        problems.append(f"{where}: {value} is above {meta['max']}")
    return problems


def request_problems(request: dict[str, Any]) -> list[str]:
    report = ParamValidator().validate(request, CREATE_TRAINING_JOB)
    problems = [report.generate_report()] if report.has_errors() else []
    problems += model_problems(request, CREATE_TRAINING_JOB)
    stop = request.get("StoppingCondition", {})
    if request.get("EnableManagedSpotTraining"):
        if stop.get("MaxWaitTimeInSeconds", 0) < stop.get("MaxRuntimeInSeconds", 0):
            problems.append(
                "StoppingCondition: a spot job's MaxWaitTimeInSeconds must be >= MaxRuntimeInSeconds"
            )
    elif "MaxWaitTimeInSeconds" in stop:
        problems.append("StoppingCondition: MaxWaitTimeInSeconds without managed spot training")
    instance_type = request.get("ResourceConfig", {}).get("InstanceType", "")
    if request["AlgorithmSpecification"]["TrainingImage"].endswith(":0123abcd"):  # the stack's image
        reason = image.unusable_reason(instance_type)
        if reason:
            problems.append(f"ResourceConfig.InstanceType: {reason}")
    return problems


@pytest.mark.parametrize("region", REGIONS)
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.relative_to(ROOT / "examples")))
def test_every_example_renders_requests_sagemaker_accepts(template, path, region):
    for request in _requests(template, path, region):
        assert request_problems(request) == [], request["TrainingJobName"]
        assert request["OutputDataConfig"]["KmsKeyId"].startswith(f"arn:aws:kms:{region}:")
        assert 1 <= len(request["HyperParameters"]) <= 100


def test_the_checks_catch_what_sagemaker_would_refuse(template):
    (good, *_) = _requests(template, ROOT / "examples" / "mnist-cnn.yaml", "us-east-1")
    bad = {
        "TrainingJobName": "x" * 64,
        "HyperParameters": {**{f"k{i}": "v" for i in range(101)}, "long": "v" * 2501},
        "ResourceConfig": {**good["ResourceConfig"], "InstanceType": "local_gpu"},
        "EnableManagedSpotTraining": True,
        "StoppingCondition": {"MaxRuntimeInSeconds": 3600, "MaxWaitTimeInSeconds": 1800},
    }
    found = "\n".join(request_problems({**good, **bad}))
    for expected in (
        "TrainingJobName: 64 characters, at most 63",
        "HyperParameters: 102 entries, at most 100",
        "HyperParameters['long']: 2501 characters, at most 2500",
        "'local_gpu' is not one of the",
        "MaxWaitTimeInSeconds must be >= MaxRuntimeInSeconds",
    ):
        assert expected in found, found
    k80 = {**good, "ResourceConfig": {**good["ResourceConfig"], "InstanceType": "ml.p2.xlarge"}}
    assert any("K80" in p for p in request_problems(k80))
    assert any("does not match" in p for p in request_problems({**good, "TrainingJobName": "a_b"}))


def test_a_warm_pool_is_asked_for_in_resource_config(template, tmp_path):
    spec = yaml.safe_load((ROOT / "examples" / "mnist-cnn.yaml").read_text())
    path = tmp_path / "warm.yaml"
    path.write_text(yaml.safe_dump({**spec, "warm_pool_seconds": 900}))
    for request in _requests(template, path, "us-east-1"):
        assert request["ResourceConfig"]["KeepAlivePeriodInSeconds"] == 900
        assert request_problems(request) == []
    (cold, *_) = _requests(template, ROOT / "examples" / "mnist-cnn.yaml", "us-east-1")
    assert cold["ResourceConfig"]["KeepAlivePeriodInSeconds"] == 0  # no pool kept
    path.write_text(yaml.safe_dump({**spec, "spot": True}))
    (spot, *_) = _requests(template, path, "us-east-1")
    assert "KeepAlivePeriodInSeconds" not in spot["ResourceConfig"]  # SageMaker: no warm pool with spot


def test_network_and_storage_settings_reach_every_request(template, tmp_path):
    spec = yaml.safe_load((ROOT / "examples" / "mnist-cnn.yaml").read_text())
    settings = {
        "volume_size_gb": 500,
        "input_mode": "FastFile",
        "network_isolation": True,
        "inter_container_encryption": True,
        "vpc": {"subnets": ["subnet-0abc", "subnet-0def"], "security_group_ids": ["sg-0123"]},
    }
    path = tmp_path / "enterprise.yaml"
    path.write_text(yaml.safe_dump({**spec, "training_job": settings, "data": "s3://my-data/mnist/"}))
    requests = _requests(template, path, "eu-west-1")
    for request in requests:
        assert request_problems(request) == []
        assert request["VpcConfig"] == {
            "Subnets": ["subnet-0abc", "subnet-0def"],
            "SecurityGroupIds": ["sg-0123"],
        }
        assert request["EnableNetworkIsolation"] is True
        assert request["EnableInterContainerTrafficEncryption"] is True
        assert request["ResourceConfig"]["VolumeSizeInGB"] == 500
        assert request["AlgorithmSpecification"]["TrainingInputMode"] == "FastFile"
    (default, *_) = _requests(template, ROOT / "examples" / "mnist-cnn.yaml", "eu-west-1")
    assert "VpcConfig" not in default and default["EnableNetworkIsolation"] is False
    assert default["ResourceConfig"]["VolumeSizeInGB"] == 50
    assert default["AlgorithmSpecification"]["TrainingInputMode"] == "File"


def test_a_sagemaker_mlflow_arn_reaches_every_request_as_mlflow_config(template, tmp_path):
    spec = yaml.safe_load((ROOT / "examples" / "mnist-cnn.yaml").read_text())
    arn = "arn:aws:sagemaker:eu-west-1:123456789012:mlflow-app/app-0a1b2c3d4e5f"
    for extra in ({}, {"spot": True, "data": "s3://my-data/mnist/"}):
        path = tmp_path / "tracked.yaml"
        tracked = {**spec, **extra, "tracking": {"mlflow": arn, "experiment": "team/mnist"}}
        path.write_text(yaml.safe_dump(tracked))
        requests = _requests(template, path, "eu-west-1")
        for request in requests:
            assert request_problems(request) == []  # botocore's MlflowConfig shape and ARN pattern
            assert request["MlflowConfig"] == {
                "MlflowResourceArn": arn,
                "MlflowExperimentName": "team/mnist",
                "MlflowRunName": request["TrainingJobName"],
            }
    path.write_text(yaml.safe_dump({**spec, "tracking": {"mlflow": "https://mlflow.example.com"}}))
    for request in _requests(template, path, "eu-west-1"):
        assert "MlflowConfig" not in request  # SageMaker tracks only into its own managed MLflow


# ---- the template's IAM actions are operations AWS has -------------------------------------------------

# IAM actions that authorise no API operation of their own (CloudWatch Logs' vended-log delivery, which
# CDK grants a state machine for its execution logs).
PERMISSION_ONLY = {f"logs:{verb}LogDelivery" for verb in ("Create", "Get", "Update", "Delete")} | {
    "logs:ListLogDeliveries"
}
IAM_PREFIX_TO_SERVICE = {"sagemaker": "sagemaker", "logs": "logs", "kms": "kms", "events": "events",
                         "servicequotas": "service-quotas", "sns": "sns", "pricing": "pricing"}  # fmt: skip


def test_every_iam_action_of_these_services_names_a_real_operation(template):
    checked = 0
    for policy in resources(template, "AWS::IAM::Policy").values():
        for st in policy["Properties"]["PolicyDocument"]["Statement"]:
            for action in as_list(st["Action"]):
                prefix, _, name = action.partition(":")
                if prefix not in IAM_PREFIX_TO_SERVICE or "*" in name or action in PERMISSION_ONLY:
                    continue
                operations = _session.get_service_model(IAM_PREFIX_TO_SERVICE[prefix]).operation_names
                assert name in operations, f"{action}: no such {prefix} operation"
                checked += 1
    assert checked >= 15
