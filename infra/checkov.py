"""checkov findings on the template that we accept, each with its reason (CloudFormation ``Metadata``,
which checkov reads as a reasoned skip); any other finding fails ``tests/infra``."""

from __future__ import annotations

from aws_cdk import CfnResource, Stack

LAMBDA = {
    "CKV_AWS_115": "no reserved concurrency by default: Lambda refuses a reservation that leaves fewer than "
    "100 executions unreserved, which a new account (limit 10 or 50) cannot afford; the context setting "
    "parse_reserved_concurrency reserves some for ParseRun where the account can",
    "CKV_AWS_116": "the state machine invokes these functions synchronously and catches their errors (a "
    "dead-letter queue serves asynchronous invocations only); ParseRun's asynchronous S3 invocations have "
    "an on-failure destination, the ParseFailures queue",
    "CKV_AWS_117": "the functions call only S3, Step Functions, SageMaker, CloudWatch Logs and the Pricing "
    "and Service Quotas APIs; a VPC would need a NAT gateway or an endpoint for each, and protect nothing",
    "CKV_AWS_173": "the environment holds the bucket's name, the training image URI and the function's own "
    "folder name, no secrets; Lambda encrypts it at rest with an AWS-owned key",
}
FINDINGS = {
    "AWS::Lambda::Function": LAMBDA,
    "AWS::Logs::LogGroup": {
        "CKV_AWS_158": "the functions' and the state machine's logs hold spec values, job names and stack "
        "traces, no secrets; CloudWatch Logs encrypts them at rest, and a customer key per deployment "
        "would add a key policy for the logs service and 1 USD a month"
    },
    "AWS::S3::Bucket": {
        "CKV_AWS_18": "server access logs would need a second bucket per deployment; CloudTrail data "
        "events are the audit trail for this bucket"
    },
    "AWS::SQS::Queue": {
        "CKV_AWS_27": "the queue is encrypted with SQS-managed keys (SqsManagedSseEnabled); a customer key "
        "would need a key policy for Lambda's on-failure destination"
    },
}


def acknowledge(stack: Stack) -> None:
    """Attach the accepted findings, with their reasons, to every resource of the types they concern."""
    for construct in stack.node.find_all():
        if isinstance(construct, CfnResource) and construct.cfn_resource_type in FINDINGS:
            skips = [{"id": i, "comment": why} for i, why in FINDINGS[construct.cfn_resource_type].items()]
            construct.add_metadata("checkov", {"skip": skips})
