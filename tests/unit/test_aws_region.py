"""One region for every command, resolved as the CDK CLI resolves it, with its source said; missing
credentials said as such, not as a missing stack or a missing price."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest
from moto import mock_aws
from typer.testing import CliRunner

from trainsweep.aws.region import cdk_region_note, resolve_region
from trainsweep.cli import app

runner = CliRunner()
SPEC = (
    "name: t\nworkload: {model: mnist-cnn, epochs: 1}\ninstance_types: [ml.g4dn.xlarge]\nbatch_sizes: [32]\n"
)
STACK = {
    "Resources": {"Bucket": {"Type": "AWS::S3::Bucket", "Properties": {"BucketName": "results-bucket"}}},
    "Outputs": {"BucketName": {"Value": {"Ref": "Bucket"}}},
}


@pytest.fixture
def profile_in_us_west_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A default profile whose region is us-west-2, and no AWS_DEFAULT_REGION."""
    config = tmp_path / "aws-config"
    config.write_text("[default]\nregion = us-west-2\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.delenv("AWS_REGION", raising=False)


def test_the_order_is_the_flag_the_spec_then_the_cdk_clis_own() -> None:
    env = {"AWS_REGION": "eu-west-1", "AWS_DEFAULT_REGION": "eu-central-1"}

    def profile(_: str | None) -> str:
        return "us-west-2"

    assert resolve_region("ap-south-1", spec_region="sa-east-1", environ=env, read_profile=profile) == (
        resolve_region("ap-south-1", environ={}, read_profile=profile)
    )
    assert (
        resolve_region(spec_region="sa-east-1", environ=env, read_profile=profile).source
        == "the spec's region"
    )
    assert resolve_region(environ=env, read_profile=profile).describe() == "eu-west-1 (from AWS_REGION)"
    assert resolve_region(environ={"AWS_DEFAULT_REGION": "eu-central-1"}, read_profile=profile).region == (
        "eu-central-1"
    )
    assert resolve_region(environ={}, read_profile=profile).describe() == "us-west-2 (from profile 'default')"
    assert resolve_region(environ={}, read_profile=lambda _: None).region is None


def test_aws_region_alone_reaches_every_command(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # boto3 alone reads no AWS_REGION: the command said "no AWS region configured".
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    with mock_aws():
        result = runner.invoke(app, ["run", str(spec), "--stack", "Missing"])
    assert result.exit_code == 1
    out = " ".join(result.output.split())
    assert "stack 'Missing' not found in eu-west-1 (region from AWS_REGION)" in out, out


def test_aws_region_wins_over_a_profile_region_as_for_cdk_deploy(
    profile_in_us_west_2: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    with mock_aws():  # deployed where `cdk deploy` puts it with this environment
        boto3.client("cloudformation", region_name="eu-west-1").create_stack(
            StackName="Trainsweep", TemplateBody=json.dumps(STACK)
        )
        result = runner.invoke(app, ["doctor"], env={"COLUMNS": "400"})
    lines = {line.split(":")[0].strip(): line for line in result.output.splitlines() if ":" in line}
    assert lines["ok   AWS region"].endswith("eu-west-1 (from AWS_REGION)"), result.output
    assert lines["ok   stack Trainsweep"].endswith("CREATE_COMPLETE"), result.output


def test_the_spec_region_is_where_run_acts(profile_in_us_west_2: None, tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC + "region: eu-central-1\n")
    with mock_aws():
        result = runner.invoke(app, ["run", str(spec), "--stack", "Missing"])
    out = " ".join(result.output.split())
    assert "not found in eu-central-1 (region from the spec's region)" in out, out


def test_no_region_anywhere_names_aws_region(profile_in_us_west_2: None, tmp_path: Path) -> None:
    (tmp_path / "empty").write_text("")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AWS_CONFIG_FILE", str(tmp_path / "empty"))
        result = runner.invoke(app, ["logs", "some-job"])
    assert result.exit_code == 1
    assert "no AWS region configured" in result.output and "AWS_REGION" in result.output


def test_the_cdk_app_warns_when_cdk_deploys_elsewhere_than_the_commands_act() -> None:
    env = {"CDK_DEFAULT_REGION": "eu-west-1", "AWS_DEFAULT_REGION": "us-east-1"}
    note = cdk_region_note(env, read_profile=lambda _: None)
    assert note is not None
    assert "cdk deploys into eu-west-1" in note and "us-east-1 (from AWS_DEFAULT_REGION)" in note
    agreeing = {"CDK_DEFAULT_REGION": "eu-west-1", "AWS_REGION": "eu-west-1", "AWS_DEFAULT_REGION": "x"}
    assert cdk_region_note(agreeing, read_profile=lambda _: None) is None
    assert cdk_region_note({}, read_profile=lambda _: None) is None


# ---- credentials ----------------------------------------------------------------------------------


@pytest.fixture
def no_credentials(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def test_missing_credentials_are_named_instead_of_a_missing_stack(
    no_credentials: None, tmp_path: Path
) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    result = runner.invoke(app, ["run", str(spec), "--region", "us-east-1", "--no-watch"])
    out = " ".join(result.output.split())
    assert result.exit_code == 1, out
    assert "AWS credentials: Unable to locate credentials" in out and "aws configure" in out, out
    assert "deploy it first" not in out


def test_missing_credentials_are_named_instead_of_a_missing_price(
    no_credentials: None, tmp_path: Path
) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC + "budget_usd: 5\n")
    result = runner.invoke(app, ["run", str(spec), "--region", "eu-west-1", "--no-watch"])
    out = " ".join(result.output.split())
    assert result.exit_code == 1, out
    assert "AWS credentials: Unable to locate credentials" in out and "aws sso login" in out, out
    assert "price" not in out


EXPIRED = "The security token included in the request is expired"


def test_expired_credentials_are_named_too() -> None:
    from botocore.exceptions import ClientError

    from trainsweep.aws.credentials import AwsCredentialsError
    from trainsweep.aws.sweeps import stack_outputs

    class Expired:
        def describe_stacks(self, **_: str) -> None:
            raise ClientError(
                {
                    "Error": {
                        "Code": "ExpiredToken",
                        "Message": "The security token included in the request is expired",
                    }
                },
                "DescribeStacks",
            )

    with pytest.raises(AwsCredentialsError, match="security token included in the request is expired"):
        stack_outputs(Expired(), "Trainsweep")  # type: ignore[arg-type]
