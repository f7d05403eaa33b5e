"""Users' own code and images: the training image per job, the code/ read, ECR pulls from configured
repositories only (context ``byo_image_repositories``), and the settings read from context."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.infra.synth_helpers import as_list, resources, statements, synth
from trainsweep import layout
from trainsweep.aws import outputs
from trainsweep.aws.config import TRAINING_IMAGE_ENV

OTHER_ACCOUNT_REPO = "arn:aws:ecr:eu-west-1:210987654321:repository/team/other"
BYO = {"byo_image_repositories": ["my-train", OTHER_ACCOUNT_REPO]}


@pytest.fixture(scope="module")
def byo_template(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """With two own-image repositories, and cdk-nag on: a finding would make this synth raise."""
    return synth(tmp_path_factory.mktemp("cdk-byo"), BYO)


def _training_statements(template: dict[str, Any]) -> list[dict[str, Any]]:
    return statements(template, "TrainingExecutionRole")


def _ecr_grants(template: dict[str, Any]) -> dict[str, list[Any]]:
    """ECR action -> the resources it is allowed on, for the training role."""
    out: dict[str, list[Any]] = {}
    for st in _training_statements(template):
        for action in as_list(st["Action"]):
            if action.startswith("ecr:"):
                out.setdefault(action, []).extend(as_list(st["Resource"]))
    return out


def _definition_text(template: dict[str, Any]) -> str:
    (sm,) = resources(template, "AWS::StepFunctions::StateMachine").values()
    return json.dumps(sm["Properties"]["DefinitionString"])


# ---- the training image comes from the job ----------------------------------------------------------


def test_every_training_task_takes_its_image_from_the_job(template):
    text = _definition_text(template)
    # sixteen training tasks: spot or not, with a data channel or not, in a VPC or not, MLflow or not
    assert text.count('\\"TrainingImage.$\\":\\"$.job.image_uri\\"') == 16
    assert '\\"TrainingImage\\":' not in text  # no literal image left in the definition


def test_only_plan_sweep_knows_the_stacks_image_and_it_is_the_image_the_stack_outputs(template):
    image = template["Outputs"][outputs.TRAINING_IMAGE_URI]["Value"]
    by_function = {}
    for fn in resources(template, "AWS::Lambda::Function").values():
        env = fn["Properties"].get("Environment", {}).get("Variables", {})
        if "TRAINSWEEP_FUNCTION" in env:
            by_function[env["TRAINSWEEP_FUNCTION"]] = env.get(TRAINING_IMAGE_ENV)
    assert by_function.pop("plan_sweep") == image
    assert set(by_function.values()) == {None}


# ---- reading a script's packed source ---------------------------------------------------------------


def test_the_training_role_reads_packed_source_only_below_code_and_writes_nothing_there(template):
    code = f"/{layout.SWEEPS_PREFIX}*/{layout.CODE_DIR}/*"
    touching = [
        (action, st)
        for st in _training_statements(template)
        for action in as_list(st["Action"])
        if any(json.dumps(r).endswith(f'{code}"]]}}') for r in as_list(st["Resource"]))
    ]
    assert [a for a, _ in touching] == ["s3:GetObject"]
    ((_, st),) = touching
    assert st.get("Sid") == "ReadSourceCode" and "Condition" not in st


# ---- pulling users' own images ---------------------------------------------------------------------


def test_without_configured_repositories_the_role_pulls_only_the_stacks_image(template):
    grants = _ecr_grants(template)
    assert "*" in grants.pop("ecr:GetAuthorizationToken")
    for action, res in grants.items():
        assert len(res) == 1 and "container-assets" in json.dumps(res[0]), (action, res)
    assert not any(st.get("Sid") == "PullOwnImages" for st in _training_statements(template))


def test_configured_repositories_are_pullable_and_nothing_else_is_added(byo_template):
    (st,) = [s for s in _training_statements(byo_template) if s.get("Sid") == "PullOwnImages"]
    assert sorted(as_list(st["Action"])) == ["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"]
    own, other = as_list(st["Resource"])
    assert json.dumps(own).endswith('":repository/my-train"]]}')
    assert other == OTHER_ACCOUNT_REPO
    grants = _ecr_grants(byo_template)
    assert grants["ecr:GetAuthorizationToken"] == ["*"]  # no resource-level permissions: the only "*"
    for action in ("ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"):
        assert "*" not in grants[action]


def test_repositories_may_also_come_as_comma_separated_text(tmp_path):
    t = synth(tmp_path, {"byo_image_repositories": " my-train , team/other "}, nag=False)
    (st,) = [s for s in _training_statements(t) if s.get("Sid") == "PullOwnImages"]
    names = [re.sub(r".*repository/", "", json.dumps(r)) for r in as_list(st["Resource"])]
    assert names == ['my-train"]]}', 'team/other"]]}']


@pytest.mark.parametrize(
    "ref", ["123456789012.dkr.ecr.us-east-1.amazonaws.com/my-train:1", "my-train:1", "My-Train"]
)
def test_an_image_uri_or_a_bad_name_in_the_context_is_refused_with_the_expected_form(ref):
    from aws_cdk import App

    from infra.settings import StackSettings

    with pytest.raises(ValueError, match=r"byo_image_repositories: .* is not an ECR repository name or ARN"):
        StackSettings.from_context(App(context={"byo_image_repositories": [ref]}).node)


def test_settings_read_every_context_value_once():
    from aws_cdk import App

    from infra.settings import StackSettings
    from infra.training_task import RetryPolicy

    app = App(
        context={
            "notification_email": "ops@example.com",
            "raw_log_days": "30",
            "data_bucket_names": "a, b,",
            "byo_image_repositories": "",
            "retry": '{"interval_s": 5}',
            "destroy_on_delete": "true",
        }
    )
    assert StackSettings.from_context(app.node) == StackSettings(
        notification_email="ops@example.com",
        raw_log_days=30,
        data_bucket_names=("a", "b"),
        image_repositories=(),
        retry=RetryPolicy(interval_s=5),
        destroy_on_delete=True,
    )
    assert StackSettings.from_context(App().node) == StackSettings()


@pytest.mark.parametrize(
    ("context", "message"),
    [
        (
            {"results_bucket_key_arn": "arn:aws:kms:us-east-1:123456789012:key/abc-123"},
            r"results_bucket_key_arn is the key of results_bucket_name: give both",
        ),
        ({"results_bucket_name": "Not_A_Bucket"}, r"results_bucket_name: 'Not_A_Bucket' is not an S3 bucket"),
        ({"parse_reserved_concurrency": "-1"}, r"parse_reserved_concurrency: '-1' is not a whole number"),
    ],
)
def test_settings_refuse_a_context_value_they_cannot_use_and_say_why(context, message):
    from aws_cdk import App

    from infra.settings import StackSettings

    with pytest.raises(ValueError, match=message):
        StackSettings.from_context(App(context=context).node)
