#!/usr/bin/env python3
"""CDK entry point: ``npx cdk synth`` / ``npx cdk deploy`` (or ``python app.py`` to synthesise only)."""

import os

from aws_cdk import App, Environment

from infra.app import build

app = App()
account, region = os.environ.get("CDK_DEFAULT_ACCOUNT"), os.environ.get("CDK_DEFAULT_REGION")
build(app, env=Environment(account=account, region=region) if account and region else None)
app.synth()
