"""The sweep state machine.

Plan -> Map(instance types) -> Distributed Map(jobs from S3: train, export log, parse; results to S3)
-> aggregate -> notify. Every state that can fail is caught: a sweep ends with a notification.

Only wiring lives here: which Lambda runs when, which errors are retried and which are caught; what the
training task sends to SageMaker, and how its errors are retried, is in :mod:`infra.training_task`.
What the steps compute lives in ``trainsweep``.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import ArnFormat, Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from infra.training_task import TRAINING_RETRY_PATH, RetryPolicy, api_error_retry, training_choice
from trainsweep import layout
from trainsweep.jobs import JOB_PATH, job_path

# A Lambda invoke fails with these when Lambda throttles or hiccups, before the function ran (or without
# its answer): another attempt is right. A ParseRun lost to them would leave a finished, billed cell
# "results not recorded". The function's own errors are not retried (they would fail the same way).
RETRYABLE_LAMBDA_ERRORS = [
    "Lambda.TooManyRequestsException",
    "Lambda.ServiceException",
    "Lambda.SdkClientException",
    "Lambda.AWSLambdaException",
    "Lambda.ClientExecutionTimeoutException",
]
LAMBDA_RETRY_INTERVAL_S = 2
LAMBDA_RETRY_ATTEMPTS = 8
LAMBDA_RETRY_MAX_DELAY_S = 60
# ParseRun has no reserved concurrency by default, so a busy account can throttle it for longer: its
# invoke waits up to about 28 minutes in all (the cell's training is done and paid for; only its record
# waits) before the cell is recorded as "results not recorded".
PARSE_RETRY_ATTEMPTS = 12
PARSE_RETRY_MAX_DELAY_S = 300


class SweepStateMachine(Construct):
    """The sweep workflow. The execution input is the spec (or ``{spec, sweep_id}``).

    Built stage by stage, each by its own method: the failure notice, the plan, one job's states (train,
    export the log, parse), the Distributed Map over an instance type's jobs, the Map over instance
    types, the aggregate; then the state machine and what its role may do beyond invoking its Lambdas
    and publishing.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        plan: lambda_.IFunction,
        parse: lambda_.IFunction,
        export: lambda_.IFunction,
        aggregate: lambda_.IFunction,
        topic: sns.ITopic,
        bucket: s3.IBucket,
        bucket_key: kms.IKey | None,
        training_role: iam.IRole,
        retry: RetryPolicy | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        notify_failure = self._failure_notice(topic)
        plan_task = _invoke(
            self,
            "PlanSweep",
            plan,
            {"input": sfn.JsonPath.entire_payload, "execution": sfn.JsonPath.string_at("$$.Execution.Name")},
            result_path="$.plan",
        )
        plan_task.add_catch(notify_failure, errors=[sfn.Errors.ALL], result_path="$.error")
        start_job = self._job(
            export,
            parse,
            role_arn=training_role.role_arn,
            key_arn=bucket_key.key_arn if bucket_key else None,
            retry=retry or RetryPolicy(),
        )
        groups_map = self._instance_types(self._jobs_map(start_job, bucket))
        aggregate_task = self._aggregate(aggregate, groups_map, notify_failure)
        notify_done = tasks.SnsPublish(
            self,
            "NotifyFinished",
            topic=topic,
            subject="trainsweep: sweep finished",
            message=sfn.TaskInput.from_json_path_at("$.summary"),
            result_path=sfn.JsonPath.DISCARD,
        )
        done = sfn.Succeed(self, "SweepFinished", output_path="$.summary")

        definition = plan_task.next(groups_map).next(aggregate_task).next(notify_done).next(done)
        self.log_group = logs.LogGroup(self, "Logs", retention=logs.RetentionDays.ONE_MONTH)
        self.state_machine = sfn.StateMachine(
            self,
            "StateMachine",
            definition_body=sfn.DefinitionBody.from_chainable(definition),
            tracing_enabled=True,
            logs=sfn.LogOptions(
                destination=self.log_group, level=sfn.LogLevel.ALL, include_execution_data=True
            ),
        )

        self._allow(
            self.state_machine.role,
            bucket=bucket,
            bucket_key=bucket_key,
            job_functions=(export, parse),
            training_role=training_role,
        )

    def _failure_notice(self, topic: sns.ITopic) -> sfn.Chain:
        """Where every caught failure of the sweep goes: publish the error, then fail the execution."""
        failed = sfn.Fail(self, "SweepFailed", error_path="$.error.Error", cause_path="$.error.Cause")
        return tasks.SnsPublish(
            self,
            "NotifyFailure",
            topic=topic,
            subject="trainsweep: sweep failed",
            message=sfn.TaskInput.from_json_path_at("$.error"),
            result_path=sfn.JsonPath.DISCARD,
        ).next(failed)

    def _job(
        self,
        export: lambda_.IFunction,
        parse: lambda_.IFunction,
        *,
        role_arn: str,
        key_arn: str | None,
        retry: RetryPolicy,
    ) -> sfn.Pass:
        """One job: train (retry / catch) -> export the log if missing -> parse and record. Returns its
        first state."""
        start_job = sfn.Pass(
            self,
            "StartJob",
            parameters={
                "outcome": {},
                "sweep_id.$": "$.sweep_id",
                "job.$": JOB_PATH,
                TRAINING_RETRY_PATH[2:]: {"attempt": 0, "wait_s": 0},
            },
        )
        export_task = self._record(export, parse)
        retry_check, retry_again = api_error_retry(self, retry, export_task)
        choose = training_choice(
            self, export_task, retry_check, role_arn=role_arn, key_arn=key_arn, retry=retry
        )
        start_job.next(choose)
        retry_again.next(choose)
        return start_job

    def _record(self, export: lambda_.IFunction, parse: lambda_.IFunction) -> tasks.LambdaInvoke:
        """After training: export the job's log if it is missing, then parse and record the cell (a
        ParseRun that fails for good records the cell as failed). Returns the export task."""
        export_task = _invoke(
            self,
            "ExportLog",
            export,
            {"sweep_id": sfn.JsonPath.string_at("$.sweep_id"), "job": sfn.JsonPath.object_at(JOB_PATH)},
            result_path=sfn.JsonPath.DISCARD,
        )
        parse_task = _invoke(
            self,
            "ParseRun",
            parse,
            {
                "sweep_id": sfn.JsonPath.string_at("$.sweep_id"),
                "job": sfn.JsonPath.object_at(JOB_PATH),
                # {training} or {error}: whichever the training task left (a missing path is an error)
                "outcome": sfn.JsonPath.object_at("$.outcome"),
            },
            attempts=PARSE_RETRY_ATTEMPTS,
            max_delay_s=PARSE_RETRY_MAX_DELAY_S,
        )
        parse_failed = sfn.Pass(
            self,
            "RecordParseFailure",
            parameters={
                "run_name.$": job_path("job_name"),
                "job_name.$": job_path("job_name"),
                "instance_type.$": job_path("instance_type"),
                "status": "failed",
                "reason.$": "States.Format('results not recorded: {}', $.parse_error.Cause)",
            },
        )
        parse_task.add_catch(parse_failed, errors=[sfn.Errors.ALL], result_path="$.parse_error")
        export_task.add_catch(parse_task, errors=[sfn.Errors.ALL], result_path=sfn.JsonPath.DISCARD)
        export_task.next(parse_task)
        return export_task

    def _jobs_map(self, start_job: sfn.State, bucket: s3.IBucket) -> sfn.CustomState:
        """One instance-type group: a Distributed Map over its jobs, read from and written to S3.

        The state carries references only: the jobs come from the group's file, each job runs as a child
        execution, and the cells' records go to S3 (ResultWriter), so neither many jobs nor long failure
        reasons can reach the 256 KiB state limit. A job whose workflow fails does not fail the group
        (tolerated failures: 100 %, from the group); AggregateSweep records its cells as failed.
        Written as ASL rather than sfn.DistributedMap: CDK's reader and writer would grant the role the
        whole bucket (and ResultWriterV2 renders only behind a feature flag); the grants
        (:meth:`_allow_fan_out`) are scoped to the fan-out files. The job states are rendered from their
        own graph.
        """
        partition = Stack.of(self).partition
        job_states = sfn.StateGraph(start_job, "Jobs").to_graph_json()
        return sfn.CustomState(
            self,
            "Jobs",
            state_json={
                "Type": "Map",
                "Label": "Jobs",
                "ItemReader": {
                    "Resource": f"arn:{partition}:states:::s3:getObject",
                    "ReaderConfig": {"InputType": "JSON"},
                    "Parameters": {"Bucket": bucket.bucket_name, "Key.$": "$.group.jobs_key"},
                },
                "ItemSelector": {"sweep_id.$": "$.sweep_id", "job.$": "$$.Map.Item.Value"},
                "MaxConcurrencyPath": "$.group.max_concurrency",
                # A number literal 100 here would do on AWS; moto's parser takes only a decimal.
                "ToleratedFailurePercentagePath": "$.group.tolerated_failure_percentage",
                "ItemProcessor": {
                    "ProcessorConfig": {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"},
                    **job_states,
                },
                "ResultWriter": {
                    "Resource": f"arn:{partition}:states:::s3:putObject",
                    "Parameters": {"Bucket": bucket.bucket_name, "Prefix.$": "$.map_results_prefix"},
                },
                "ResultSelector": {"results.$": "$.ResultWriterDetails"},
            },
        )

    def _instance_types(self, jobs_map: sfn.CustomState) -> sfn.Map:
        """A Map over the plan's instance-type groups, each running ``jobs_map``."""
        # A group whose map could not run (its job list unreadable, results not writable) still ends in
        # the aggregate: its cells are recorded as failed with this error.
        group_failed = sfn.Pass(
            self,
            "RecordGroupFailure",
            parameters={"instance_type.$": "$.group.instance_type", "error.$": "$.map_error"},
        )
        jobs_map.add_catch(group_failed, errors=[sfn.Errors.ALL], result_path="$.map_error")
        groups_map = sfn.Map(
            self,
            "InstanceTypes",
            items_path="$.plan.groups",
            max_concurrency_path="$.plan.group_concurrency",
            item_selector={
                "sweep_id.$": "$.plan.sweep_id",
                "map_results_prefix.$": "$.plan.map_results_prefix",
                "group.$": "$$.Map.Item.Value",
            },
            result_path="$.maps",
        )
        groups_map.item_processor(jobs_map)
        return groups_map

    def _aggregate(
        self, aggregate: lambda_.IFunction, groups_map: sfn.Map, notify_failure: sfn.IChainable
    ) -> tasks.LambdaInvoke:
        """AggregateSweep, which runs whatever the fan-out left."""
        aggregate_task = _invoke(
            self,
            "AggregateSweep",
            aggregate,
            {"sweep_id": sfn.JsonPath.string_at("$.plan.sweep_id"), "maps": sfn.JsonPath.object_at("$.maps")},
            result_path="$.summary",
        )
        # Should the fan-out itself fail, the aggregate still runs ($.maps is then that error) and records
        # every planned cell without a result as failed.
        groups_map.add_catch(aggregate_task, errors=[sfn.Errors.ALL], result_path="$.maps")
        aggregate_task.add_catch(notify_failure, errors=[sfn.Errors.ALL], result_path="$.error")
        return aggregate_task

    def _allow(
        self,
        role: iam.IRole,
        *,
        bucket: s3.IBucket,
        bucket_key: kms.IKey | None,
        job_functions: tuple[lambda_.IFunction, ...],
        training_role: iam.IRole,
    ) -> None:
        """What the state machine may do beyond invoking its Lambdas and publishing."""
        self._allow_training_jobs(role)
        self._allow_fan_out(role, bucket, bucket_key)
        for fn in job_functions:  # invoked by the job states, which CDK does not see inside the map
            role.add_to_principal_policy(
                iam.PolicyStatement(
                    actions=["lambda:InvokeFunction"], resources=[fn.function_arn, f"{fn.function_arn}:*"]
                )
            )
        self._allow_child_executions(role)
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["iam:PassRole"],
                resources=[training_role.role_arn],
                conditions={"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}},
            )
        )

    def _allow_training_jobs(self, role: iam.IRole) -> None:
        """Create, describe and stop training jobs, and wait for them (``.sync``)."""
        stack = Stack.of(self)
        training_job_arn = stack.format_arn(service="sagemaker", resource="training-job", resource_name="*")
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=[
                    "sagemaker:CreateTrainingJob",
                    "sagemaker:DescribeTrainingJob",
                    "sagemaker:StopTrainingJob",
                    "sagemaker:AddTags",
                    "sagemaker:ListTags",  # in AWS's documented policy for createTrainingJob.sync
                ],
                resources=[training_job_arn],
            )
        )
        # `.sync` on SageMaker works through this managed EventBridge rule.
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["events:PutTargets", "events:PutRule", "events:DescribeRule"],
                resources=[
                    stack.format_arn(
                        service="events",
                        resource="rule",
                        resource_name="StepFunctionsGetEventsForSageMakerTrainingJobsRule",
                    )
                ],
            )
        )

    @staticmethod
    def _allow_fan_out(role: iam.IRole, bucket: s3.IBucket, bucket_key: kms.IKey | None) -> None:
        """The Distributed Map: read the groups' job lists, write their results (SSE-KMS objects)."""
        fan_out = layout.sweep_prefix("*") + layout.MAP_DIR + "/*/"
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["s3:GetObject"], resources=[bucket.arn_for_objects(fan_out + "jobs-*.json")]
            )
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                # What CDK's own ResultWriter grants: the writer reads back the parts it wrote.
                actions=[
                    "s3:PutObject",
                    "s3:GetObject",
                    "s3:ListMultipartUploadParts",
                    "s3:AbortMultipartUpload",
                ],
                resources=[bucket.arn_for_objects(fan_out + "results/*")],
            )
        )
        if bucket_key is not None:
            role.add_to_principal_policy(
                iam.PolicyStatement(
                    actions=["kms:Decrypt", "kms:GenerateDataKey"], resources=[bucket_key.key_arn]
                )
            )

    def _allow_child_executions(self, role: iam.IRole) -> None:
        """The Distributed Map runs each job as a child execution of this state machine. A separate
        policy: the state machine's ARN in its own role's default policy would be a circular dependency.
        """
        stack = Stack.of(self)

        def executions(name: str) -> str:
            return stack.format_arn(
                service="states",
                resource="execution",
                resource_name=name,
                arn_format=ArnFormat.COLON_RESOURCE_NAME,
            )

        machine = self.state_machine.state_machine_name
        # AWS's documented Distributed Map policy (execution:<machine>:*), and the child executions'
        # own ARNs (execution:<machine>/<label>:<id>), which that pattern does not match; redriving a
        # sweep re-runs its failed child executions (states:RedriveExecution on them).
        own, children = executions(f"{machine}:*"), executions(f"{machine}/Jobs:*")
        iam.Policy(
            self,
            "DistributedMapPolicy",
            roles=[role],
            statements=[
                iam.PolicyStatement(
                    actions=["states:StartExecution"], resources=[self.state_machine.state_machine_arn]
                ),
                iam.PolicyStatement(
                    actions=["states:DescribeExecution", "states:StopExecution"], resources=[own, children]
                ),
                iam.PolicyStatement(actions=["states:RedriveExecution"], resources=[children]),
            ],
        )


def _invoke(
    scope: Construct,
    construct_id: str,
    function: lambda_.IFunction,
    payload: dict[str, Any],
    *,
    result_path: str | None = None,
    attempts: int = LAMBDA_RETRY_ATTEMPTS,
    max_delay_s: int = LAMBDA_RETRY_MAX_DELAY_S,
) -> tasks.LambdaInvoke:
    """A Lambda task whose state output is the function's own return value (no invocation metadata).

    Throttling and Lambda service errors are retried with exponential backoff and full jitter (CDK's
    default retrier, replaced here, has no jitter and misses ``Lambda.TooManyRequestsException``).
    """
    task = tasks.LambdaInvoke(
        scope,
        construct_id,
        lambda_function=function,
        payload=sfn.TaskInput.from_object(payload),
        payload_response_only=True,
        result_path=result_path,
        retry_on_service_exceptions=False,
    )
    task.add_retry(
        errors=RETRYABLE_LAMBDA_ERRORS,
        interval=Duration.seconds(LAMBDA_RETRY_INTERVAL_S),
        max_attempts=attempts,
        backoff_rate=2.0,
        max_delay=Duration.seconds(max_delay_s),
        jitter_strategy=sfn.JitterType.FULL,
    )
    return task
