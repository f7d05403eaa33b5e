"""Build the CDK app: the stack, with cdk-nag's AwsSolutions checks and our reasoned acknowledgements."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import App, Environment, Validations
from cdk_nag import AwsSolutionsChecks

from infra import checkov
from infra.nag import acknowledge
from infra.stack import TrainsweepStack
from trainsweep.aws import outputs


def build(
    app: App, *, env: Environment | None = None, nag: bool = True, image_directory: Path | None = None
) -> TrainsweepStack:
    """Add the trainsweep stack to ``app`` (and the cdk-nag checks, which make synth raise on findings),
    with the checkov findings it accepts (:mod:`infra.checkov`).

    ``image_directory`` replaces the training image's build context (tests; default: this repository).
    """
    stack = TrainsweepStack(
        app,
        outputs.STACK_NAME,
        env=env,
        image_directory=image_directory,
        description="trainsweep: instance type x batch size sweeps of SageMaker training jobs",
    )
    checkov.acknowledge(stack)
    if nag:
        Validations.of(app).add_plugins(AwsSolutionsChecks(app))
        acknowledge(stack)
    return stack
