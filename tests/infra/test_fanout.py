"""The sweep's fan-out in the synthesized template (issue 13, item 10): a Distributed Map per instance
type reading its jobs from S3 and writing results to S3, every failing state caught, and the state
machine role granted exactly what the Distributed Map needs."""

from __future__ import annotations

import json
from typing import Any

from tests.infra.synth_helpers import as_list, resources, states_by_name


def _definition(template: dict[str, Any]) -> dict[str, Any]:
    sm = next(iter(resources(template, "AWS::StepFunctions::StateMachine").values()))
    parts = sm["Properties"]["DefinitionString"]["Fn::Join"][1]
    return json.loads("".join(p if isinstance(p, str) else "TOKEN" for p in parts))


def _sm_statements(template: dict[str, Any]) -> list[dict[str, Any]]:
    sm = next(
        lid for lid, r in resources(template, "AWS::StepFunctions::StateMachine").items() if "Sweep" in lid
    )
    role = resources(template, "AWS::StepFunctions::StateMachine")[sm]["Properties"]["RoleArn"]["Fn::GetAtt"][
        0
    ]
    out: list[dict[str, Any]] = []
    for res in resources(template, "AWS::IAM::Policy").values():
        if {"Ref": role} in res["Properties"].get("Roles", []):
            out += res["Properties"]["PolicyDocument"]["Statement"]
    return out


def test_each_instance_types_jobs_run_in_a_distributed_map_reading_and_writing_s3(template):
    states = states_by_name(_definition(template))
    jobs = states["Jobs"]
    assert jobs["Type"] == "Map"
    assert jobs["ItemProcessor"]["ProcessorConfig"] == {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"}
    assert jobs["ItemReader"]["Resource"].endswith(":states:::s3:getObject")
    assert jobs["ItemReader"]["ReaderConfig"] == {"InputType": "JSON"}
    assert jobs["ItemReader"]["Parameters"]["Key.$"] == "$.group.jobs_key"
    assert jobs["ResultWriter"]["Resource"].endswith(":states:::s3:putObject")
    assert jobs["ResultWriter"]["Parameters"]["Prefix.$"] == "$.map_results_prefix"
    assert jobs["ToleratedFailurePercentagePath"] == "$.group.tolerated_failure_percentage"
    assert jobs["MaxConcurrencyPath"] == "$.group.max_concurrency"
    # only the result files' reference comes back into the state
    assert jobs["ResultSelector"] == {"results.$": "$.ResultWriterDetails"}
    assert {"StartJob", "TrainingKind", "ExportLog", "ParseRun"} <= set(jobs["ItemProcessor"]["States"])


def test_every_state_that_can_fail_is_caught_so_a_sweep_ends_with_a_notification(template):
    definition = _definition(template)
    states = states_by_name(definition)
    uncaught = [
        name
        for name, s in states.items()
        if s["Type"] in ("Task", "Map")
        and not any("States.ALL" in c["ErrorEquals"] for c in s.get("Catch", []))
    ]
    # Publishing a notification is the last thing a sweep does: nothing is left to tell if it fails.
    assert sorted(uncaught) == ["NotifyFailure", "NotifyFinished"]
    assert states["InstanceTypes"]["Catch"][0]["Next"] == "AggregateSweep"
    assert states["Jobs"]["Catch"][0]["Next"] == "RecordGroupFailure"
    for name in ("PlanSweep", "AggregateSweep"):
        assert states[name]["Catch"][0]["Next"] == "NotifyFailure"


def test_the_state_machine_may_run_its_own_child_executions_and_touch_only_the_fan_out_files(template):
    stmts = _sm_statements(template)

    def granted(action: str) -> list[str]:
        return [
            json.dumps(r) for s in stmts if action in as_list(s["Action"]) for r in as_list(s["Resource"])
        ]

    (start,) = granted("states:StartExecution")
    assert '"Ref": "SweepStateMachine' in start
    # AWS's documented Distributed Map policy, and the child executions, which a redrive re-runs
    own, children = granted("states:DescribeExecution")
    assert own.endswith('":*"]]}') and children.endswith('"/Jobs:*"]]}'), (own, children)
    assert granted("states:StopExecution") == [own, children]
    assert granted("states:RedriveExecution") == [children]
    read, _ = granted("s3:GetObject")
    assert read.endswith('/sweeps/*/map/*/jobs-*.json"]]}')
    (write,) = granted("s3:PutObject")
    assert write.endswith('/sweeps/*/map/*/results/*"]]}')
    # what CDK's own ResultWriter grants on the results
    for action in ("s3:GetObject", "s3:ListMultipartUploadParts", "s3:AbortMultipartUpload"):
        assert write in granted(action), action
    assert not any(r.endswith('"/*"]]}') for a in ("s3:GetObject", "s3:PutObject") for r in granted(a))
    assert granted("kms:GenerateDataKey") and granted("kms:Decrypt")
    invoke = " ".join(granted("lambda:InvokeFunction"))
    for fn in ("PlanSweep", "ExportLog", "ParseRun", "AggregateSweep"):
        assert fn in invoke, fn
