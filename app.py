#!/usr/bin/env python3
"""CDK entry point: ``npx cdk synth`` / ``npx cdk deploy`` (or ``python app.py`` to synthesise only).

The stack is environment-agnostic on purpose: ``cdk deploy`` sets ``CDK_DEFAULT_ACCOUNT`` and
``CDK_DEFAULT_REGION`` from the credentials, and binding the stack to them would turn the IAM
resources' tokens into literal ARNs that the reviewed cdk-nag acknowledgements do not name. The
stack uses no lookups, so the CLI deploys it into the account and region of the credentials anyway.
"""

import sys

from aws_cdk import App

from infra.app import build
from trainsweep.aws.region import cdk_region_note

note = cdk_region_note()
if note:  # `cdk deploy` and `trainsweep run` would act in different regions
    print(note, file=sys.stderr)
app = App()
build(app)
app.synth()
