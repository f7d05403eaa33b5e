"""CDK assertions on the synthesized trainsweep stack (resources, least privilege, triggers, outputs)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.infra.synth_helpers import ROOT, as_list, resources, statements, states_by_name, synth
from trainsweep import layout
from trainsweep.aws import outputs


def _one(template: dict[str, Any], type_: str) -> tuple[str, dict[str, Any]]:
    found = resources(template, type_)
    assert len(found) == 1, f"expected one {type_}, found {sorted(found)}"
    return next(iter(found.items()))


def _logical_id(template: dict[str, Any], type_: str, startswith: str) -> str:
    ids = [k for k in resources(template, type_) if k.startswith(startswith)]
    assert len(ids) == 1, ids
    return ids[0]


# ---- the results bucket -----------------------------------------------------------------------


def test_results_bucket_is_kms_encrypted_versioned_and_private(template):
    _, bucket = _one(template, "AWS::S3::Bucket")
    props = bucket["Properties"]
    sse = props["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]
    assert sse["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "aws:kms"
    assert "KMSMasterKeyID" in sse["ServerSideEncryptionByDefault"]
    assert props["VersioningConfiguration"] == {"Status": "Enabled"}
    assert props["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    assert bucket["DeletionPolicy"] == "Retain"


def test_results_bucket_refuses_requests_without_tls(template):
    _, policy = _one(template, "AWS::S3::BucketPolicy")
    denies = [s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s["Effect"] == "Deny"]
    assert any(s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} for s in denies)


def test_overwritten_log_versions_expire_and_raw_log_expiry_is_configurable(template, tmp_path):
    rules = _one(template, "AWS::S3::Bucket")[1]["Properties"]["LifecycleConfiguration"]["Rules"]
    assert [r["Id"] for r in rules] == ["expire-noncurrent-versions"]
    assert rules[0]["NoncurrentVersionExpiration"]["NoncurrentDays"] == 7

    custom = synth(tmp_path, {"raw_log_days": "30"}, nag=False)
    rules = _one(custom, "AWS::S3::Bucket")[1]["Properties"]["LifecycleConfiguration"]["Rules"]
    by_id = {r["Id"]: r for r in rules}
    assert by_id["expire-imported-logs"]["Prefix"] == layout.IMPORTS_PREFIX
    assert by_id["expire-imported-logs"]["ExpirationInDays"] == 30
    assert by_id["expire-raw-logs"]["TagFilters"] == [{"Key": "trainsweep-kind", "Value": "raw-log"}]


# ---- triggers -------------------------------------------------------------------------------------


def test_only_raw_log_prefixes_trigger_the_parse_function(template):
    _, notes = _one(template, "Custom::S3BucketNotifications")
    configs = notes["Properties"]["NotificationConfiguration"]["LambdaFunctionConfigurations"]
    parse_id = _logical_id(template, "AWS::Lambda::Function", "ParseRun")
    filters = []
    for c in configs:
        assert c["LambdaFunctionArn"] == {"Fn::GetAtt": [parse_id, "Arn"]}
        assert c["Events"] == ["s3:ObjectCreated:*"]
        filters.append({r["Name"]: r["Value"] for r in c["Filter"]["Key"]["FilterRules"]})
    assert sorted(filters, key=str) == sorted(
        [{"prefix": "sweeps/", "suffix": ".log"}, {"prefix": "imports/"}], key=str
    )

    def triggers(key: str) -> bool:
        return any(key.startswith(f["prefix"]) and key.endswith(f.get("suffix", "")) for f in filters)

    sweep = "demo-20260101-000000"
    assert triggers(layout.log_key(sweep, "demo-p3-1-64-e0"))
    assert triggers("imports/old/result-p3-1-64-e1.txt")
    for rel in (
        layout.execution_times_path("p3-1", 64, 1, "json"),
        layout.execution_times_path("p3-1", 64, 1, "summary"),
        layout.execution_times_path("p3-1", 64, 1, "png"),
        layout.run_record_path("demo-p3-1-64-e0"),
        layout.SWEEP_CSV,
        layout.SWEEP_JSON,
        layout.REPORT_HTML,
        layout.plot_path("heatmap"),
    ):
        assert not triggers(layout.results_key(sweep, rel)), rel
    assert not triggers(layout.spec_key(sweep))
    assert not triggers(layout.jobs_key(sweep))


# ---- least privilege ------------------------------------------------------------------------------


def test_the_training_role_can_be_assumed_only_by_sagemaker(template):
    role = template["Resources"][_logical_id(template, "AWS::IAM::Role", "TrainingExecutionRole")]
    (trust,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "sagemaker.amazonaws.com"}
    assert trust["Action"] == "sts:AssumeRole"
    assert "ManagedPolicyArns" not in role["Properties"]
    # confused deputy: only training jobs of this stack's account and region may assume it
    assert trust["Condition"]["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
    arn = json.dumps(trust["Condition"]["ArnLike"]["aws:SourceArn"])
    for part in ("arn:", "AWS::Partition", ":sagemaker:", "AWS::Region", "AWS::AccountId", ":training-job/*"):
        assert part in arn, arn


def test_the_training_role_writes_only_logs_outputs_and_checkpoints_of_sweeps(template):
    allowed: dict[str, set[str]] = {}
    for st in statements(template, "TrainingExecutionRole"):
        for action in as_list(st["Action"]):
            if action.startswith("s3:"):
                for r in as_list(st["Resource"]):
                    allowed.setdefault(action, set()).add(_object_suffix(r))
    assert allowed == {
        "s3:PutObject": {"/sweeps/*/logs/*.log", "/sweeps/*/output/*", "/sweeps/*/checkpoints/*"},
        "s3:PutObjectTagging": {"/sweeps/*/logs/*.log"},
        "s3:GetObject": {"/sweeps/*/checkpoints/*", "/sweeps/*/code/*", "/data/*"},
        "s3:DeleteObject": {"/sweeps/*/checkpoints/*"},
        "s3:ListBucket": {"<bucket>"},
    }


def _object_suffix(resource: Any) -> str:
    """``/prefix/*`` of an ``<bucket arn>/prefix/*`` resource, ``<bucket>`` for the bucket itself."""
    if isinstance(resource, dict) and "Fn::Join" in resource:
        return resource["Fn::Join"][1][-1]
    if isinstance(resource, dict) and "Fn::GetAtt" in resource:
        return "<bucket>"
    return json.dumps(resource)


def test_pass_role_is_granted_once_for_the_training_role_and_only_to_sagemaker(template):
    training_role = _logical_id(template, "AWS::IAM::Role", "TrainingExecutionRole")
    passes = []
    for lid, policy in resources(template, "AWS::IAM::Policy").items():
        for st in policy["Properties"]["PolicyDocument"]["Statement"]:
            if "iam:PassRole" in as_list(st["Action"]) or "iam:*" in as_list(st["Action"]):
                passes.append((lid, st))
    assert len(passes) == 1
    lid, st = passes[0]
    assert lid.startswith("SweepStateMachineRole")
    assert st["Resource"] == {"Fn::GetAtt": [training_role, "Arn"]}
    assert st["Condition"] == {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}}


def test_no_policy_allows_every_action(template):
    for lid, policy in resources(template, "AWS::IAM::Policy").items():
        for st in policy["Properties"]["PolicyDocument"]["Statement"]:
            for action in as_list(st["Action"]):
                assert action != "*" and not action.endswith(":*"), (lid, action)


def test_functions_reach_only_the_sweeps_and_imports_prefixes_of_the_bucket(template):
    for fn in ("PlanSweep", "ParseRun", "ExportLog", "AggregateSweep"):
        allowed = ['"/sweeps/*"]]}', '"/imports/*"]]}']
        if fn == "PlanSweep":  # and the stack's price cache
            allowed.append(f'"/{layout.PRICES_KEY}"]]}}')
        for st in statements(template, f"{fn}FunctionServiceRole"):
            if st["Effect"] != "Allow" or not any(a.startswith("s3:") for a in as_list(st["Action"])):
                continue
            for r in as_list(st["Resource"]):
                text = json.dumps(r)
                if "Fn::Join" in text:
                    assert any(text.endswith(a) for a in allowed), (fn, text)


def test_plan_sweep_may_ask_the_pricing_api_and_keep_its_answers_in_the_bucket(template):
    plan = statements(template, "PlanSweepFunctionServiceRole")
    pricing = [st for st in plan if "pricing:GetProducts" in as_list(st["Action"])]
    assert pricing and all(st["Resource"] == "*" and st["Effect"] == "Allow" for st in pricing)
    on_cache = [
        a
        for st in plan
        if any(json.dumps(r).endswith(f'"/{layout.PRICES_KEY}"]]}}') for r in as_list(st["Resource"]))
        for a in as_list(st["Action"])
    ]
    assert "s3:GetObject*" in on_cache and "s3:PutObject" in on_cache
    for fn in ("ParseRun", "ExportLog", "AggregateSweep"):
        actions = [
            a for st in statements(template, f"{fn}FunctionServiceRole") for a in as_list(st["Action"])
        ]
        assert "pricing:GetProducts" not in actions, fn


def test_only_export_log_may_write_the_raw_logs_that_trigger_parse_run(template):
    """An explicit Deny, not only the code: a function bug or a future grant cannot make ParseRun (or
    PlanSweep, AggregateSweep) write a key that triggers ParseRun again, or rewrite a job's log."""

    def denied(fn: str) -> set[str]:
        out = set()
        for st in statements(template, f"{fn}FunctionServiceRole"):
            if st["Effect"] == "Deny" and "s3:PutObject" in as_list(st["Action"]):
                assert "s3:PutObject*" in as_list(st["Action"])  # tagging, ACLs, retention too
                out |= {_object_suffix(r) for r in as_list(st["Resource"])}
        return out

    for fn in ("PlanSweep", "ParseRun", "AggregateSweep"):
        assert denied(fn) == {"/sweeps/*/logs/*"}, fn
    assert denied("ExportLog") == set()
    export_puts = [
        _object_suffix(r)
        for st in statements(template, "ExportLogFunctionServiceRole")
        if st["Effect"] == "Allow" and "s3:PutObject" in as_list(st["Action"])
        for r in as_list(st["Resource"])
    ]
    assert export_puts == ["/sweeps/*"]


def test_parse_runs_failed_s3_invocations_go_to_an_encrypted_ssl_only_queue(template):
    parse = _logical_id(template, "AWS::Lambda::Function", "ParseRun")
    queue_id, queue = _one(template, "AWS::SQS::Queue")
    assert queue["Properties"]["SqsManagedSseEnabled"] is True
    assert queue["Properties"]["MessageRetentionPeriod"] == 14 * 24 * 3600
    _, config = _one(template, "AWS::Lambda::EventInvokeConfig")
    props = config["Properties"]
    assert props["FunctionName"] == {"Ref": parse}
    assert props["MaximumRetryAttempts"] == 2
    assert props["DestinationConfig"] == {"OnFailure": {"Destination": {"Fn::GetAtt": [queue_id, "Arn"]}}}
    _, policy = _one(template, "AWS::SQS::QueuePolicy")
    [deny] = [st for st in policy["Properties"]["PolicyDocument"]["Statement"] if st["Effect"] == "Deny"]
    assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    sends = [
        st
        for st in statements(template, "ParseRunFunctionServiceRole")
        if "sqs:SendMessage" in as_list(st["Action"])
    ]
    assert [st["Resource"] for st in sends] == [{"Fn::GetAtt": [queue_id, "Arn"]}]
    assert template["Outputs"][outputs.PARSE_FAILURE_QUEUE_URL]["Value"] == {"Ref": queue_id}


# ---- functions --------------------------------------------------------------------------------------


def test_four_handler_functions_know_their_source_folder_and_the_bucket(template):
    bucket_id = _one(template, "AWS::S3::Bucket")[0]
    names = {}
    for lid, fn in resources(template, "AWS::Lambda::Function").items():
        env = fn["Properties"].get("Environment", {}).get("Variables", {})
        if "TRAINSWEEP_FUNCTION" not in env:
            continue  # CDK's own notification handler
        names[env["TRAINSWEEP_FUNCTION"]] = lid
        assert env["TRAINSWEEP_BUCKET"] == {"Ref": bucket_id}
        assert fn["Properties"]["Runtime"] == "python3.12"
        assert fn["Properties"]["Handler"] == "handler.handler"
        assert fn["Properties"]["TracingConfig"] == {"Mode": "Active"}
        assert (ROOT / "lambdas" / env["TRAINSWEEP_FUNCTION"] / "handler.py").is_file()
    assert sorted(names) == ["aggregate_sweep", "export_log", "parse_run", "plan_sweep"]


def test_only_the_plotting_functions_carry_matplotlib_and_none_carries_pandas_or_scipy():
    def requirements(name: str) -> set[str]:
        lines = (ROOT / "lambdas" / name / "requirements.txt").read_text().splitlines()
        return {ln.split("==")[0].strip().lower() for ln in lines if ln.strip() and not ln.startswith("#")}

    for name in ("plan_sweep", "export_log"):
        assert not requirements(name) & {"matplotlib", "numpy", "pandas", "scipy"}, name
    for name in ("parse_run", "aggregate_sweep"):  # e<N>.png, report plots
        assert {"matplotlib", "numpy"} <= requirements(name), name
        assert not requirements(name) & {"pandas", "scipy"}, name
    for name in ("plan_sweep", "parse_run", "export_log", "aggregate_sweep"):
        assert all(
            "==" in ln
            for ln in (ROOT / "lambdas" / name / "requirements.txt").read_text().splitlines()
            if ln.strip() and not ln.startswith("#")
        ), f"{name}: pin every requirement"


# ---- notifications and outputs ---------------------------------------------------------------------


def test_topic_is_encrypted_and_email_subscription_comes_from_context(template, tmp_path):
    _, topic = _one(template, "AWS::SNS::Topic")
    assert "KmsMasterKeyId" in topic["Properties"]
    assert not resources(template, "AWS::SNS::Subscription")

    with_mail = synth(tmp_path, {"notification_email": "ops@example.com"}, nag=False)
    ((_, sub),) = resources(with_mail, "AWS::SNS::Subscription").items()
    assert sub["Properties"]["Protocol"] == "email"
    assert sub["Properties"]["Endpoint"] == "ops@example.com"


def test_stack_outputs_name_what_the_cli_reads(template):
    outs = template["Outputs"]
    for name in (outputs.STATE_MACHINE_ARN, outputs.BUCKET_NAME, outputs.TOPIC_ARN):
        assert name in outs
    sm = _logical_id(template, "AWS::StepFunctions::StateMachine", "Sweep")
    assert outs[outputs.STATE_MACHINE_ARN]["Value"] == {"Ref": sm}


def test_the_training_image_is_built_from_the_container_folder():
    # The image asset's build context is the repository; its Dockerfile belongs to the container part.
    assert (ROOT / "container" / "Dockerfile").is_file(), "container/Dockerfile is missing"


@pytest.mark.parametrize(
    "cli_env", [{}, {"CDK_DEFAULT_ACCOUNT": "123456789012", "CDK_DEFAULT_REGION": "eu-west-1"}]
)
def test_app_py_synthesizes_without_docker_or_credentials(tmp_path, cli_env):
    """Also as ``cdk deploy`` runs it, with the account and region of the credentials in the environment."""
    import os
    import subprocess
    import sys

    assert (ROOT / "container" / "Dockerfile").is_file(), "app.py builds the image asset from it"
    env = {**os.environ, "CDK_OUTDIR": str(tmp_path), "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    env.pop("CDK_DEFAULT_ACCOUNT", None)
    env.pop("CDK_DEFAULT_REGION", None)
    env.update(cli_env)
    proc = subprocess.run(
        [sys.executable, str(ROOT / "app.py")],
        cwd=ROOT,
        env={**env, "CDK_CONTEXT_JSON": json.dumps({"aws:cdk:bundling-stacks": []})},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert Path(tmp_path, f"{outputs.STACK_NAME}.template.json").is_file()


def test_retry_backoff_comes_from_context_as_object_or_json_text():
    from infra.training_task import RetryPolicy

    assert RetryPolicy.from_context(None) == RetryPolicy()
    assert RetryPolicy.from_context({"interval_s": 5}).interval_s == 5
    assert RetryPolicy.from_context('{"max_attempts": "2"}').max_attempts == 2


TRAIN_STATES = [
    "Train" + spot + data + vpc + mlflow
    for spot in ("", "Spot")
    for data in ("", "WithData")
    for vpc in ("", "InVpc")
    for mlflow in ("", "WithMlflow")
]


def test_training_task_retries_with_backoff_and_jitter_and_catches_everything_else(template):
    sm = next(r for r in resources(template, "AWS::StepFunctions::StateMachine").values())
    text = json.dumps(sm["Properties"]["DefinitionString"])
    for name in TRAIN_STATES:
        assert f'\\"{name}\\":' in text, name
    assert text.count("arn:aws:states:::sagemaker:createTrainingJob.sync") == len(TRAIN_STATES) == 16
    states = _definition_states(template)
    for name in TRAIN_STATES:
        assert [r["JitterStrategy"] for r in states[name]["Retry"]] == ["FULL"], name
    assert text.count('\\"MaxRuntimeInSeconds.$\\":\\"$.job.max_runtime_seconds\\"') == 16
    assert text.count('\\"MaxConcurrencyPath\\"') == 2


def test_only_throttling_limits_capacity_and_server_errors_are_retried(template):
    from infra.training_task import RETRYABLE_TRAINING_CAUSES, TRAINING_API_ERROR

    states = _definition_states(template)
    for name in TRAIN_STATES:
        retried = {e for r in states[name]["Retry"] for e in r["ErrorEquals"]}
        assert TRAINING_API_ERROR not in retried and "States.ALL" not in retried, name
        catches = {c["ErrorEquals"][0]: c["Next"] for c in states[name]["Catch"]}
        assert catches[TRAINING_API_ERROR] == "RetryableTrainingError"
    check = json.dumps(states["RetryableTrainingError"])
    for pattern in RETRYABLE_TRAINING_CAUSES:
        assert json.dumps(pattern) in check
    assert states["RetryableTrainingError"]["Default"] == "ExportLog"  # anything else: recorded at once


def test_the_retry_waits_grow_to_the_policys_cap():
    from infra.training_task import RetryPolicy

    assert RetryPolicy().caps_s() == [30, 60, 120, 240, 480, 600]
    assert RetryPolicy(interval_s=1, max_attempts=3, max_delay_s=2).caps_s() == [1, 2, 2]


# ---- what the AWS integrations need (issue 13) -------------------------------------------------------


def _allows(sts: list[dict[str, Any]], action: str) -> list[dict[str, Any]]:
    return [s for s in sts if s["Effect"] == "Allow" and action in as_list(s["Action"])]


def test_the_state_machine_may_do_what_aws_documents_for_create_training_job_sync(template):
    sts = statements(template, "SweepStateMachineRole")
    for action in (
        "sagemaker:CreateTrainingJob",
        "sagemaker:DescribeTrainingJob",
        "sagemaker:StopTrainingJob",
        "sagemaker:AddTags",
        "sagemaker:ListTags",
        "events:PutTargets",
        "events:PutRule",
        "events:DescribeRule",
        "iam:PassRole",
    ):
        assert _allows(sts, action), action
    (tags,) = _allows(sts, "sagemaker:ListTags")
    assert ":training-job/*" in json.dumps(tags["Resource"])  # scoped like the other job actions


def test_the_training_role_may_use_the_key_its_output_is_encrypted_with(template):
    sm = next(iter(resources(template, "AWS::StepFunctions::StateMachine").values()))
    assert "KmsKeyId" in json.dumps(sm["Properties"]["DefinitionString"])  # the requests name the key
    key_id = _logical_id(template, "AWS::KMS::Key", "ResultsKey")
    sts = statements(template, "TrainingExecutionRole")
    for action in ("kms:Encrypt", "kms:GenerateDataKey", "kms:Decrypt"):
        on_key = [s for s in _allows(sts, action) if s["Resource"] == {"Fn::GetAtt": [key_id, "Arn"]}]
        assert on_key, action


def test_the_training_role_may_read_sse_kms_data_buckets_through_s3_only(template, tmp_path):
    assert not [
        s for s in statements(template, "TrainingExecutionRole") if s.get("Sid") == "DecryptDataBuckets"
    ]
    # nag on: the data buckets' read grants are acknowledged too
    custom = synth(tmp_path, {"data_bucket_names": "team-data,more-data"})
    (st,) = [s for s in statements(custom, "TrainingExecutionRole") if s.get("Sid") == "DecryptDataBuckets"]
    assert as_list(st["Action"]) == ["kms:Decrypt"]
    assert json.dumps(st["Condition"]["StringEquals"]["kms:ViaService"]).count("amazonaws.com") == 1
    arns = json.dumps(st["Condition"]["ArnLike"]["kms:EncryptionContext:aws:s3:arn"])
    for bucket in ("team-data", "more-data"):
        assert f':s3:::{bucket}"' in arns and f':s3:::{bucket}/*"' in arns, arns


def test_plan_sweep_knows_the_buckets_the_training_role_may_read(tmp_path):
    tpl = synth(tmp_path, {"data_bucket_names": "team-data,more-data"}, nag=False)
    variables = [
        fn["Properties"].get("Environment", {}).get("Variables", {})
        for fn in resources(tpl, "AWS::Lambda::Function").values()
    ]
    (plan,) = [v for v in variables if v.get("TRAINSWEEP_FUNCTION") == "plan_sweep"]
    assert plan["TRAINSWEEP_DATA_BUCKETS"] == "team-data,more-data"


def test_the_training_role_may_create_the_log_group_in_a_fresh_region(template):
    (st,) = _allows(statements(template, "TrainingExecutionRole"), "logs:CreateLogGroup")
    # CreateLogGroup is authorised on the group's own ARN, which ".../TrainingJobs:*" does not match.
    resources_ = [json.dumps(r) for r in as_list(st["Resource"])]
    assert any(r.endswith(':log-group:/aws/sagemaker/TrainingJobs"]]}') for r in resources_), resources_
    # ... and on the ":*" form too, as AWS's own policies grant it
    assert any(r.endswith(':log-group:/aws/sagemaker/TrainingJobs:*"]]}') for r in resources_), resources_
    (put,) = _allows(statements(template, "TrainingExecutionRole"), "logs:PutLogEvents")
    assert json.dumps(put["Resource"]).endswith(':log-group:/aws/sagemaker/TrainingJobs:*"]]}')


def _definition_states(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every state of the sweep definition by name (Map item processors included)."""
    sm = next(iter(resources(template, "AWS::StepFunctions::StateMachine").values()))
    parts = sm["Properties"]["DefinitionString"]["Fn::Join"][1]
    text = "".join(p if isinstance(p, str) else "TOKEN" for p in parts)  # tokens lie inside strings
    return states_by_name(json.loads(text))


def test_lambda_throttling_is_retried_with_backoff_and_jitter(template):
    states = _definition_states(template)
    for name in ("PlanSweep", "ExportLog", "ParseRun", "AggregateSweep"):
        retries = states[name].get("Retry", [])
        throttled = [r for r in retries if "Lambda.TooManyRequestsException" in r["ErrorEquals"]]
        assert throttled, (name, retries)
        (r,) = throttled
        assert {"Lambda.ServiceException", "Lambda.SdkClientException"} <= set(r["ErrorEquals"])
        assert r["JitterStrategy"] == "FULL" and r["BackoffRate"] > 1 and r["MaxAttempts"] >= 5
        assert "States.ALL" not in r["ErrorEquals"]  # the function's own errors are caught, not retried


def test_a_throttled_parse_run_is_retried_for_many_minutes(template):
    # ParseRun has no reserved concurrency: its invoke from the state machine waits out a busy account.
    (r,) = [
        r
        for r in _definition_states(template)["ParseRun"]["Retry"]
        if "Lambda.TooManyRequestsException" in r["ErrorEquals"]
    ]
    waits, delay = 0.0, float(r["IntervalSeconds"])
    for _ in range(r["MaxAttempts"] - 1):
        waits += min(delay, r["MaxDelaySeconds"])
        delay *= r["BackoffRate"]
    assert waits >= 20 * 60, r


def test_parse_run_reserves_no_concurrency_unless_the_context_asks(template, tmp_path):
    # Lambda refuses a reservation that leaves fewer than 100 executions unreserved: a new account
    # (limit 10 or 50) could not deploy a stack that reserves any by default.
    def reserved(tpl: dict[str, Any]) -> dict[str, Any]:
        return {
            fn["Properties"]["Environment"]["Variables"]["TRAINSWEEP_FUNCTION"]: fn["Properties"].get(
                "ReservedConcurrentExecutions"
            )
            for fn in resources(tpl, "AWS::Lambda::Function").values()
            if "TRAINSWEEP_FUNCTION" in fn["Properties"].get("Environment", {}).get("Variables", {})
        }

    assert reserved(template) == {
        "plan_sweep": None,
        "parse_run": None,
        "export_log": None,
        "aggregate_sweep": None,
    }
    assert reserved(synth(tmp_path, {"parse_reserved_concurrency": "5"}, nag=False))["parse_run"] == 5
    with pytest.raises(ValueError, match="parse_reserved_concurrency"):
        synth(tmp_path / "bad", {"parse_reserved_concurrency": "lots"}, nag=False)


def test_a_resume_waits_longer_for_aggregate_sweep_than_it_may_run(template):
    from trainsweep.aws.resume import AGGREGATE_READ_TIMEOUT_S

    (aggregate,) = [
        fn["Properties"]
        for fn in resources(template, "AWS::Lambda::Function").values()
        if fn["Properties"].get("Environment", {}).get("Variables", {}).get("TRAINSWEEP_FUNCTION")
        == "aggregate_sweep"
    ]
    assert aggregate["Timeout"] + 60 <= AGGREGATE_READ_TIMEOUT_S


# ---- existing resources: accounts where the deployment may not create IAM roles -----------------------

EXISTING = {
    "training_role_arn": "arn:aws:iam::123456789012:role/team/sagemaker-training",
    "results_bucket_name": "team-results",
    "results_bucket_key_arn": "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab",
}


def test_an_existing_role_and_bucket_are_used_instead_of_created(tmp_path):
    tpl = synth(tmp_path, EXISTING)  # cdk-nag on: every finding still acknowledged
    roles = resources(tpl, "AWS::IAM::Role").values()
    principals = json.dumps([r["Properties"]["AssumeRolePolicyDocument"] for r in roles])
    assert "sagemaker.amazonaws.com" not in principals  # no training role of the stack's own
    assert not resources(tpl, "AWS::S3::Bucket")
    assert tpl["Outputs"]["TrainingRoleArn"]["Value"] == EXISTING["training_role_arn"]
    assert tpl["Outputs"]["BucketName"]["Value"] == "team-results"
    text = json.dumps(tpl)
    assert text.count(EXISTING["results_bucket_key_arn"]) >= 2  # KmsKeyId of the jobs, the functions' grants
    (pass_role,) = [
        s for s in statements(tpl, "SweepStateMachineRole") if "iam:PassRole" in as_list(s["Action"])
    ]
    assert pass_role["Resource"] == EXISTING["training_role_arn"]
    assert "team-results/sweeps/*" in text  # the functions' grants name the bucket
    variables = [
        fn["Properties"].get("Environment", {}).get("Variables", {})
        for fn in resources(tpl, "AWS::Lambda::Function").values()
    ]
    (plan,) = [v for v in variables if v.get("TRAINSWEEP_FUNCTION") == "plan_sweep"]
    assert plan["TRAINSWEEP_DATA_BUCKETS"] == "*"  # what that role reads is its owners' business


def test_an_existing_bucket_without_a_key_gives_the_jobs_no_kms_key(tmp_path):
    tpl = synth(tmp_path, {"results_bucket_name": "team-results"}, nag=False)
    states = _definition_states(tpl)
    assert "KmsKeyId" not in states["Train"]["Parameters"]["OutputDataConfig"]


@pytest.mark.parametrize(
    ("key", "value"),
    [("training_role_arn", "sagemaker-training"), ("results_bucket_key_arn", "alias/mine")],
)
def test_an_existing_resource_that_is_not_an_arn_is_refused(tmp_path, key, value):
    context = {"results_bucket_name": "team-results", key: value}
    with pytest.raises(ValueError, match=key):
        synth(tmp_path, context, nag=False)


MLFLOW_SERVER = "arn:aws:sagemaker:us-east-1:123456789012:mlflow-tracking-server/team"
MLFLOW_APP = "arn:aws:sagemaker:us-east-1:123456789012:mlflow-app/app-0a1b2c3d4e5f"


def test_the_training_role_may_use_only_the_managed_mlflow_it_is_given(template, tmp_path):
    assert not [s for s in statements(template, "TrainingExecutionRole") if "MLflow" in json.dumps(s)]
    assert "sagemaker-mlflow" not in json.dumps(template)
    # nag on: the action wildcard is acknowledged, synth raises nothing
    tracked = synth(tmp_path, {"mlflow_resource_arns": f"{MLFLOW_SERVER},{MLFLOW_APP}"})
    (st,) = [s for s in statements(tracked, "TrainingExecutionRole") if s.get("Sid") == "UseManagedMlflow"]
    assert as_list(st["Action"]) == ["sagemaker-mlflow:*"]
    assert as_list(st["Resource"]) == [MLFLOW_SERVER, MLFLOW_APP]
    assert json.dumps(tracked).count("sagemaker-mlflow") == 1  # no other role gets it


def test_an_mlflow_resource_that_is_not_a_sagemaker_mlflow_arn_is_refused(tmp_path):
    with pytest.raises(ValueError, match="mlflow_resource_arns: 'http://mlflow:5000' is not a SageMaker"):
        synth(tmp_path, {"mlflow_resource_arns": "http://mlflow:5000"}, nag=False)
