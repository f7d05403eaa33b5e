"""The sweep spec: validation with field paths, grid expansion, job names, worst-case cost."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainsweep import hyperparameters as hp
from trainsweep import image, instances, layout
from trainsweep.errors import BudgetExceededError, SpecError
from trainsweep.spec import (
    SAGEMAKER_NAME_MAX,
    SweepSpec,
    job_name,
    load_spec,
    make_sweep_id,
    plan_sweep,
)

NOW = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)
# Test-only prices (USD/h), so these tests do not depend on the shipped catalogue's figures.
PRICES = {"ml.p3.2xlarge": 4.0, "ml.g4dn.xlarge": 1.0, "ml.p2.xlarge": 2.0, "ml.p3.8xlarge": 16.0}


def table_price(instance_type: str, region: str) -> float | None:
    return PRICES.get(instance_type) if region == "us-east-1" else None


def make_spec(**overrides: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "name": "demo",
        "workload": {"model": "mnist-cnn", "epochs": 3},
        "instance_types": ["ml.p3.2xlarge", "ml.g4dn.xlarge"],
        "batch_sizes": [256, 512],
    }
    spec.update(overrides)
    return spec


def plan(**overrides: Any) -> Any:
    kwargs = {k: overrides.pop(k) for k in ("bucket", "sweep_id", "region") if k in overrides}
    return plan_sweep(make_spec(**overrides), now=NOW, price=table_price, **kwargs)


def errors_of(spec: Any) -> list[tuple[str, str]]:
    with pytest.raises(SpecError) as info:
        load_spec(spec)
    assert info.value.errors, "a SpecError must list (field, message) pairs"
    return info.value.errors


def fields_of(spec: Any) -> list[str]:
    return [f for f, _ in errors_of(spec)]


# ---- loading and defaults ---------------------------------------------------------------------------


def test_minimal_spec_gets_documented_defaults() -> None:
    spec = load_spec(make_spec())
    assert spec.max_runtime_seconds == 3600
    assert spec.repetitions == 1
    assert spec.instance_count == 1
    assert spec.mode == "full"
    assert spec.packing == "per-cell"
    assert spec.spot is False
    assert spec.workload.dataset == "mnist"
    assert spec.workload.synthetic is False


def test_yaml_file_and_json_file_load_the_same_spec(tmp_path: Path) -> None:
    import yaml

    (tmp_path / "s.yaml").write_text(yaml.safe_dump(make_spec()))
    (tmp_path / "s.json").write_text(json.dumps(make_spec()))
    assert load_spec(tmp_path / "s.yaml") == load_spec(str(tmp_path / "s.json"))


def test_spec_text_is_accepted() -> None:
    text = "name: t\nworkload: {model: resnet50-cifar10}\ninstance_types: [ml.p3.2xlarge]\nbatch_sizes: [8]\n"
    assert load_spec(text).workload.dataset == "cifar10"


def test_missing_file_is_a_spec_error(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="not found"):
        load_spec(tmp_path / "nope.yaml")


def test_yaml_syntax_error_names_the_line() -> None:
    with pytest.raises(SpecError, match="line 2"):
        load_spec("name: t\n- item\n")


def test_json_syntax_error_names_the_line(tmp_path: Path) -> None:
    (tmp_path / "s.json").write_text('{"name": "t",\n "batch_sizes": [1,]}')
    with pytest.raises(SpecError, match="line 2"):
        load_spec(tmp_path / "s.json")


def test_a_key_given_twice_in_yaml_is_refused() -> None:
    with pytest.raises(SpecError, match="'name' is given twice"):
        load_spec("name: a\nname: b\n")


def test_a_non_mapping_document_is_refused() -> None:
    assert errors_of("- 1\n- 2\n") == [("(spec)", "got a list")]


def test_dollar_schema_key_for_editors_is_accepted() -> None:
    spec = load_spec(make_spec(**{"$schema": "./sweep-spec.schema.json"}))
    assert "$schema" not in spec.to_dict()


# ---- validation errors point at the field -------------------------------------------------------------


def test_unknown_field_is_named() -> None:
    assert fields_of(make_spec(batchsizes=[1])) == ["batchsizes"]


def test_unknown_nested_field_is_named() -> None:
    assert fields_of(make_spec(workload={"model": "mnist-cnn", "epoch": 3})) == ["workload.epoch"]


def test_missing_required_fields_are_each_named() -> None:
    assert sorted(fields_of({"name": "x"})) == ["batch_sizes", "instance_types", "workload"]


def test_unknown_instance_type_points_at_its_index_and_suggests_the_close_name() -> None:
    [(field, message)] = errors_of(make_spec(instance_types=["ml.g4dn.xlarge", "ml.p3.2xlarg"]))
    assert field == "instance_types[1]"
    assert "did you mean 'ml.p3.2xlarge'" in message


def test_bad_batch_size_points_at_its_index() -> None:
    assert fields_of(make_spec(batch_sizes=[256, 0])) == ["batch_sizes[1]"]


def test_duplicated_batch_size_is_refused() -> None:
    assert fields_of(make_spec(batch_sizes=[256, 256])) == ["batch_sizes"]


def test_duplicated_instance_type_is_refused() -> None:
    assert fields_of(make_spec(instance_types=["local", "local"])) == ["instance_types"]


def test_empty_grid_is_refused() -> None:
    assert fields_of(make_spec(batch_sizes=[])) == ["batch_sizes"]


def test_unknown_model_lists_the_known_ones() -> None:
    [(field, message)] = errors_of(make_spec(workload={"model": "mnist"}))
    assert field == "workload.model"
    assert "mnist-cnn" in message and "resnet50-cifar10" in message


def test_dataset_that_does_not_fit_the_model_is_refused() -> None:
    assert fields_of(make_spec(workload={"model": "mnist-cnn", "dataset": "cifar10"})) == ["workload.dataset"]


@pytest.mark.parametrize("name", [hp.BATCH_SIZE, hp.EPOCHS, hp.WORKLOAD, hp.LOG_BUCKET])
def test_hyperparameters_the_planner_sets_cannot_be_given_by_hand(name: str) -> None:
    spec = make_spec(workload={"model": "mnist-cnn", "hyperparameters": {name: "1"}})
    assert fields_of(spec) == [f"workload.hyperparameters.{name}"]


def test_null_hyperparameter_value_is_refused() -> None:
    spec = make_spec(workload={"model": "mnist-cnn", "hyperparameters": {"learning-rate": None}})
    assert fields_of(spec) == ["workload.hyperparameters.learning-rate"]


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"mode": "fast"}, "mode"),
        ({"packing": "per-type"}, "packing"),
        ({"max_runtime_seconds": 10}, "max_runtime_seconds"),
        ({"max_runtime_seconds": 29 * 24 * 3600}, "max_runtime_seconds"),
        ({"repetitions": 0}, "repetitions"),
        ({"instance_count": 0}, "instance_count"),
        ({"max_concurrency": 0}, "max_concurrency"),
        ({"budget_usd": -1}, "budget_usd"),
        ({"budget_usd": "ten"}, "budget_usd"),
        ({"spot": "maybe"}, "spot"),
        ({"data": "http://example.com/x"}, "data"),
        ({"region": "Mars"}, "region"),
        ({"name": "-leading-dash"}, "name"),
        ({"name": ""}, "name"),
    ],
)
def test_invalid_scalar_is_reported_at_its_field(overrides: dict[str, Any], field: str) -> None:
    assert fields_of(make_spec(**overrides)) == [field]


def test_pattern_errors_are_explained_not_dumped() -> None:
    [(_, message)] = errors_of(make_spec(region="Mars"))
    assert "like us-east-1" in message and "^" not in message


def test_local_and_cloud_instance_types_do_not_mix() -> None:
    assert fields_of(make_spec(instance_types=["local", "ml.p3.2xlarge"])) == ["instance_types"]


def test_local_mode_runs_up_to_eight_hosts_per_job_on_the_cpu_only() -> None:
    synthetic = {"model": "mnist-cnn", "synthetic": True}
    assert (
        load_spec(make_spec(instance_types=["local"], instance_count=2, workload=synthetic)).instance_count
        == 2
    )
    assert fields_of(make_spec(instance_types=["local"], instance_count=9, workload=synthetic)) == [
        "instance_count"
    ]
    assert fields_of(make_spec(instance_types=["local_gpu"], instance_count=2, workload=synthetic)) == [
        "instance_count"
    ]


def test_file_uri_needs_local_mode() -> None:
    assert fields_of(make_spec(data="file:///data/mnist")) == ["data"]
    assert (
        load_spec(make_spec(instance_types=["local"], data="file:///data/mnist")).data == "file:///data/mnist"
    )


def test_max_wait_needs_spot_and_covers_the_runtime() -> None:
    assert fields_of(make_spec(max_wait_seconds=7200)) == ["max_wait_seconds"]
    assert fields_of(make_spec(spot=True, max_wait_seconds=600)) == ["max_wait_seconds"]


def test_error_message_lists_every_problem_with_its_field() -> None:
    with pytest.raises(SpecError) as info:
        load_spec(make_spec(mode="fast", batch_sizes=[0]))
    text = str(info.value)
    assert "mode:" in text and "batch_sizes[0]:" in text


def test_model_built_directly_still_validates() -> None:
    with pytest.raises(ValueError, match="listed twice"):
        SweepSpec.model_validate(make_spec(batch_sizes=[8, 8]))


# ---- sweep ids and job names ----------------------------------------------------------------------------


def test_sweep_id_is_the_sanitised_name_and_utc_time() -> None:
    eastern = NOW.astimezone(timezone_offset(-5))
    assert make_sweep_id("My Sweep_v2!", eastern) == "my-sweep-v2-20260304-050607"


def timezone_offset(hours: int) -> Any:
    from datetime import timezone

    return timezone(timedelta(hours=hours))


def test_per_cell_expands_one_job_per_type_batch_size_and_repetition() -> None:
    p = plan(repetitions=3)
    assert p.job_count == 2 * 2 * 3
    cells = {(j.instance_type, j.batch_sizes[0], j.repetition) for j in p.jobs}
    assert len(cells) == 12
    assert {j.repetition for j in p.jobs} == {0, 1, 2}
    assert all(j.run_names == (j.job_name,) for j in p.jobs)


def test_per_instance_packing_makes_one_job_per_type_and_repetition_scanning_all_batch_sizes() -> None:
    p = plan(packing="per-instance", repetitions=2, batch_sizes=[64, 128, 256])
    assert p.job_count == 2 * 2
    job = p.jobs[0]
    assert job.job_name == "demo-20260304-050607-p3-1-packed-e0"
    assert job.batch_sizes == (64, 128, 256)
    assert job.run_names == tuple(f"demo-20260304-050607-p3-1-{bs}-e0" for bs in (64, 128, 256))
    assert job.hyperparameters[hp.BATCH_SIZES] == "64,128,256"
    assert job.hyperparameters[hp.RUN_NAMES] == ",".join(job.run_names)
    assert hp.BATCH_SIZE not in job.hyperparameters
    assert p.run_count == 2 * 2 * 3


def test_job_names_round_trip_through_the_layout_parser() -> None:
    for packing in ("per-cell", "per-instance"):
        p = plan(packing=packing, repetitions=2)
        for job in p.jobs:
            cell = layout.parse_job_name(job.job_name)
            assert cell is not None
            assert (cell.vmtype, cell.run) == (job.vmtype, job.repetition)
            assert cell.batch_size == (job.batch_sizes[0] if packing == "per-cell" else None)
            for bs, run_name in zip(job.batch_sizes, job.run_names, strict=True):
                assert layout.parse_job_name(run_name) == layout.CellName(job.vmtype, bs, job.repetition)


def test_job_dict_carries_the_state_machine_fields() -> None:
    p = plan(bucket="results-bucket", data="s3://my-data/mnist/")
    job = p.jobs[0]
    assert set(job.to_json()) >= {
        "job_name",
        "run_names",
        "instance_type",
        "instance_count",
        "vmtype",
        "batch_sizes",
        "repetition",
        "hyperparameters",
        "max_runtime_seconds",
        "spot",
        "max_wait_seconds",
        "checkpoint_s3_uri",
        "data_s3_uri",
        "output_s3_uri",
    }
    assert job.vmtype == instances.vmtype(job.instance_type)
    assert job.max_runtime_seconds == 3600
    assert job.spot is False and job.max_wait_seconds is None and job.checkpoint_s3_uri is None
    assert job.data_s3_uri == "s3://my-data/mnist/"
    assert job.output_s3_uri == f"s3://results-bucket/{layout.output_prefix(p.sweep_id)}"


def test_hyperparameters_are_all_strings_with_the_container_names() -> None:
    p = plan(
        bucket="b",
        mode="early-stop",
        workload={
            "model": "resnet50-cifar10",
            "epochs": 2,
            "synthetic": True,
            "hyperparameters": {"learning-rate": 0.01, "max-steps-per-epoch": 5, "nesterov": False},
        },
    )
    params = p.jobs[0].hyperparameters
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in params.items())
    assert params[hp.WORKLOAD] == "resnet50-cifar10"
    assert params[hp.EPOCHS] == "2"
    assert params[hp.MODE] == "early-stop"
    assert params[hp.SYNTHETIC] == "true"
    assert params[hp.BATCH_SIZE] == "256"
    assert params[hp.RUN_NAMES] == p.jobs[0].job_name
    assert params["learning-rate"] == "0.01"
    assert params[hp.MAX_STEPS_PER_EPOCH] == "5"
    assert params["nesterov"] == "false"
    assert params[hp.LOG_BUCKET] == "b"
    assert params[hp.LOG_PREFIX] == layout.logs_prefix(p.sweep_id)


def test_without_a_bucket_no_s3_uris_are_invented() -> None:
    job = plan(spot=True).jobs[0]
    assert hp.LOG_BUCKET not in job.hyperparameters
    assert job.output_s3_uri is None and job.checkpoint_s3_uri is None


def test_spot_jobs_get_a_wait_limit_and_their_own_checkpoint_prefix() -> None:
    p = plan(spot=True, bucket="b")
    uris = {j.checkpoint_s3_uri for j in p.jobs}
    assert len(uris) == p.job_count
    job = p.jobs[0]
    assert job.max_wait_seconds == 7200
    assert job.checkpoint_s3_uri == f"s3://b/{layout.checkpoint_prefix(p.sweep_id, job.job_name)}"
    assert plan(spot=True, max_wait_seconds=5000).jobs[0].max_wait_seconds == 5000


def test_long_sweep_names_are_cut_to_63_characters_with_a_hash_that_keeps_sweeps_apart() -> None:
    long_a = "a" * 60 + "-20260304-050607"
    long_b = "a" * 60 + "-20260304-050608"
    name_a = job_name(long_a, "g4dn12x-4", 2048, 10)
    name_b = job_name(long_b, "g4dn12x-4", 2048, 10)
    assert len(name_a) <= SAGEMAKER_NAME_MAX and len(name_b) <= SAGEMAKER_NAME_MAX
    assert name_a != name_b
    assert name_a.endswith("-g4dn12x-4-2048-e10")
    assert layout.parse_job_name(name_a) == layout.CellName("g4dn12x-4", 2048, 10)


def test_given_sweep_id_is_used_as_is() -> None:
    assert plan(sweep_id="resume-me-1").jobs[0].job_name.startswith("resume-me-1-")


@pytest.mark.parametrize("bad", ["has space", "-lead", "trail-", "x" * 81, "under_score"])
def test_invalid_sweep_id_is_refused(bad: str) -> None:
    with pytest.raises(SpecError, match="sweep id"):
        plan(sweep_id=bad)


# Cloud types the stack's image can run on (ml.p2.* is refused at plan time: test_image_gpus.py).
USABLE_CLOUD_TYPES = [t for t in instances.CATALOGUE if t.startswith("ml.") and not image.unusable_reason(t)]
sweep_names = st.text(alphabet=st.sampled_from("abcXYZ019-_. "), min_size=1, max_size=64)


@settings(max_examples=150, deadline=None)
@given(
    name=sweep_names,
    vm=st.sampled_from([instances.vmtype(t) for t in instances.CATALOGUE]),
    bs=st.one_of(st.none(), st.integers(1, 1_000_000)),
    rep=st.integers(0, 99),
    seconds=st.integers(0, 10**8),
)
def test_any_name_is_sagemaker_valid_and_reads_back(
    name: str, vm: str, bs: int | None, rep: int, seconds: int
) -> None:
    sweep_id = make_sweep_id(name, NOW + timedelta(seconds=seconds))
    n = job_name(sweep_id, vm, bs, rep)
    assert len(n) <= SAGEMAKER_NAME_MAX
    assert n[0].isalnum() and all(c.isalnum() or c == "-" for c in n)
    assert layout.parse_job_name(n) == layout.CellName(vm, bs, rep)


def test_job_names_are_unique_within_a_large_sweep() -> None:
    types = USABLE_CLOUD_TYPES[:12]
    p = plan_sweep(
        make_spec(name="x" * 64, instance_types=types, batch_sizes=[1, 10, 100, 1000], repetitions=5),
        now=NOW,
        price=lambda t, r: 1.0,
    )
    names = [j.job_name for j in p.jobs]
    assert len(set(names)) == len(names) == 12 * 4 * 5


# ---- cost, time, budget ---------------------------------------------------------------------------------


def test_worst_case_cost_is_instances_times_runtime_times_price_summed_over_jobs() -> None:
    p = plan(repetitions=3, instance_count=2, max_runtime_seconds=1800)
    # 2 batch sizes × 3 repetitions × 2 instances × 0.5 h × (4 + 1) USD/h
    assert p.worst_case_cost_usd == pytest.approx(2 * 3 * 2 * 0.5 * (4.0 + 1.0))
    assert p.hourly_usd == {"ml.p3.2xlarge": 4.0, "ml.g4dn.xlarge": 1.0}


def test_a_warm_pool_left_after_each_job_counts_in_the_worst_case_and_the_jobs() -> None:
    p = plan(repetitions=3, max_runtime_seconds=1800, warm_pool_seconds=600)
    # each job may leave its pool unused for the whole keep-alive, which is billed
    assert p.worst_case_cost_usd == pytest.approx(2 * 3 * (1800 + 600) / 3600 * (4.0 + 1.0))
    assert {j.keep_alive_seconds for j in p.jobs} == {600}
    assert {j.keep_alive_seconds for j in plan().jobs} == {0}


def test_worst_case_time_accounts_for_concurrency() -> None:
    assert plan(max_concurrency=5, max_runtime_seconds=600).worst_case_seconds == 600  # 4 jobs, 1 wave
    assert plan(max_concurrency=3, max_runtime_seconds=600).worst_case_seconds == 1200  # 4 jobs, 2 waves
    assert plan(max_concurrency=1, max_runtime_seconds=600).worst_case_seconds == 2400


def test_spot_worst_case_time_includes_waiting_for_capacity() -> None:
    assert plan(spot=True, max_concurrency=4, max_runtime_seconds=600).worst_case_seconds == 1200


def test_local_instance_types_cost_nothing() -> None:
    spec = make_spec(instance_types=["local"], budget_usd=0.01, data="file:///data")
    p = plan_sweep(spec, now=NOW, price=table_price)
    assert p.worst_case_cost_usd == 0.0


def test_sweep_over_budget_is_refused_with_both_numbers() -> None:
    with pytest.raises(BudgetExceededError) as info:
        plan(budget_usd=5)
    message = str(info.value)
    assert "10.00 USD" in message and "5.00 USD" in message


def test_sweep_within_budget_is_planned() -> None:
    assert plan(budget_usd=10).worst_case_cost_usd == 10.0


def test_over_budget_plan_can_still_be_shown() -> None:
    p = plan_sweep(make_spec(budget_usd=1), now=NOW, price=table_price, enforce_budget=False)
    assert p.worst_case_cost_usd == 10.0


def test_unknown_price_leaves_the_cost_unknown_and_says_which_type() -> None:
    p = plan(instance_types=["ml.p3.2xlarge", "ml.g5.xlarge"])
    assert p.worst_case_cost_usd is None
    assert p.unpriced_instance_types == ["ml.g5.xlarge"]


def test_budget_cannot_be_checked_without_a_price() -> None:
    with pytest.raises(SpecError) as info:
        plan(instance_types=["ml.g5.xlarge"], budget_usd=100)
    assert info.value.errors[0][0] == "budget_usd"


def test_region_comes_from_the_spec_and_must_agree_with_the_caller() -> None:
    assert plan(region="eu-west-1").region == "eu-west-1"
    assert plan_sweep(make_spec(region="eu-west-1"), now=NOW, price=table_price).region == "eu-west-1"
    with pytest.raises(SpecError) as info:
        plan_sweep(make_spec(region="eu-west-1"), region="us-east-1", now=NOW, price=table_price)
    assert info.value.errors[0][0] == "region"


def test_default_prices_come_from_the_shipped_catalogue(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from trainsweep.cost.prices import hourly_usd

    monkeypatch.setenv("TRAINSWEEP_CACHE_DIR", str(tmp_path))
    p = plan_sweep(make_spec(), now=NOW)
    assert p.hourly_usd["ml.p3.2xlarge"] == hourly_usd("ml.p3.2xlarge", "us-east-1")
    assert p.worst_case_cost_usd is not None and p.worst_case_cost_usd > 0


# ---- outputs ---------------------------------------------------------------------------------------------


def test_plan_outputs_are_json_round_trippable() -> None:
    p = plan(bucket="b", spot=True)
    doc = p.to_dict()
    assert json.loads(json.dumps(doc)) == doc
    assert doc["jobs"] == [j.to_json() for j in p.jobs]
    state = p.to_state_input()
    assert state["sweep_id"] == p.sweep_id
    assert state["max_concurrency"] == 4
    assert state["jobs"] == p.jobs


def test_jobs_json_is_deterministic_and_lists_every_job() -> None:
    a, b = plan(bucket="b").jobs_json(), plan(bucket="b").jobs_json()
    assert a == b
    doc = json.loads(a)
    assert doc["sweep_id"] == "demo-20260304-050607"
    assert [j["job_name"] for j in doc["jobs"]] == [j.job_name for j in plan().jobs]


def test_a_replanned_sweep_writes_the_same_jobs_json() -> None:
    first = plan_sweep(make_spec(), sweep_id="s-1", now=NOW, price=table_price, bucket="b")
    retry = plan_sweep(
        make_spec(), sweep_id="s-1", now=NOW + timedelta(minutes=3), price=table_price, bucket="b"
    )
    assert first.created_at != retry.created_at
    assert first.jobs_json() == retry.jobs_json()


def test_spec_in_the_plan_is_the_normalised_spec_and_loads_again() -> None:
    p = plan()
    assert load_spec(p.to_dict()["spec"]) == p.spec


def test_job_for_run_finds_the_packed_job() -> None:
    p = plan(packing="per-instance")
    job = p.jobs[1]
    assert p.job_for_run(job.run_names[1]) is job
    assert p.job_for_run("no-such-run") is None


cloud_types = st.lists(
    st.sampled_from(USABLE_CLOUD_TYPES),
    min_size=1,
    max_size=5,
    unique=True,
)


@settings(max_examples=60, deadline=None)
@given(
    name=st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", fullmatch=True),
    types=cloud_types,
    batch_sizes=st.lists(st.integers(1, 100_000), min_size=1, max_size=6, unique=True),
    repetitions=st.integers(1, 4),
    count=st.integers(1, 3),
    packing=st.sampled_from(["per-cell", "per-instance"]),
    concurrency=st.integers(1, 10),
)
def test_any_valid_spec_plans_into_a_consistent_grid(
    name: str,
    types: list[str],
    batch_sizes: list[int],
    repetitions: int,
    count: int,
    packing: str,
    concurrency: int,
) -> None:
    p = plan_sweep(
        make_spec(
            name=name,
            instance_types=types,
            batch_sizes=batch_sizes,
            repetitions=repetitions,
            instance_count=count,
            packing=packing,
            max_concurrency=concurrency,
        ),
        now=NOW,
        price=lambda t, r: 2.0,
    )
    per_job = len(batch_sizes) if packing == "per-cell" else 1
    assert p.job_count == len(types) * repetitions * per_job
    assert p.run_count == len(types) * repetitions * len(batch_sizes)
    run_names = [r for j in p.jobs for r in j.run_names]
    assert len(set(run_names)) == len(run_names)
    assert len({j.job_name for j in p.jobs}) == p.job_count
    cells = {layout.parse_job_name(r) for r in run_names}
    expected = {
        layout.CellName(instances.vmtype_with_nodes(t, count), bs, rep)
        for t in types
        for bs in batch_sizes
        for rep in range(repetitions)
    }
    assert cells == expected
    assert p.worst_case_cost_usd == pytest.approx(p.job_count * count * 2.0, abs=0.01)
    assert p.worst_case_seconds == -(-p.job_count // concurrency) * 3600


@pytest.mark.parametrize(
    ("name", "value"),
    [
        (hp.MAX_STEPS_PER_EPOCH, "many"),
        (hp.MAX_STEPS_PER_EPOCH, -1),
        (hp.MAX_STEPS_PER_EPOCH, 2.5),
        (hp.EARLY_STOP_MAX_STEPS, 2),
        (hp.EARLY_STOP_PRECISION, 2),
        (hp.EARLY_STOP_PRECISION, 0),
        (hp.LEARNING_RATE, "fast"),
        (hp.LEARNING_RATE, True),
        (hp.NUM_GPUS, "all"),
        (hp.MAX_EVAL_BATCHES, "few"),  # once only checked when the job ran
        (hp.SEED, -3),
    ],
)
def test_container_hyperparameters_are_checked_at_plan_time(name: str, value: object) -> None:
    spec = make_spec(workload={"model": "mnist-cnn", "hyperparameters": {name: value}})
    assert fields_of(spec) == [f"workload.hyperparameters.{name}"]


@pytest.mark.parametrize(
    ("name", "value"),
    [
        (hp.MAX_STEPS_PER_EPOCH, 0),
        (hp.MAX_STEPS_PER_EPOCH, "20"),
        (hp.EARLY_STOP_PRECISION, 0.05),
        (hp.LEARNING_RATE, 1e-3),
        (hp.NUM_GPUS, 4),
        ("momentum", "anything goes for names the container does not know"),
    ],
)
def test_valid_container_hyperparameters_pass(name: str, value: object) -> None:
    load_spec(make_spec(workload={"model": "mnist-cnn", "hyperparameters": {name: value}}))


def test_local_job_without_data_is_refused_unless_synthetic_or_downloading() -> None:
    assert fields_of(make_spec(instance_types=["local"])) == ["data"]
    load_spec(make_spec(instance_types=["local"], workload={"model": "mnist-cnn", "synthetic": True}))
    load_spec(make_spec(instance_types=["local"], data="file:///data/mnist"))
    load_spec(
        make_spec(
            instance_types=["local"], workload={"model": "mnist-cnn", "hyperparameters": {"download": True}}
        )
    )


def test_a_resumed_attempt_renames_the_jobs_but_not_their_runs() -> None:
    """SageMaker never accepts a job name twice: a resume's jobs get new names, its logs the old keys."""
    spec = {
        "name": "again",
        "workload": {"model": "mnist-cnn", "synthetic": True},
        "instance_types": ["ml.p3.2xlarge"],
        "batch_sizes": [256, 512],
    }
    first = plan_sweep(spec, sweep_id="again-20261122-120000", price=lambda t, r: 3.06)
    resumed = plan_sweep(spec, sweep_id="again-20261122-120000", price=lambda t, r: 3.06, attempt="r1a2b3c")
    assert [j.run_names for j in resumed.jobs] == [j.run_names for j in first.jobs]
    assert not {j.job_name for j in resumed.jobs} & {j.job_name for j in first.jobs}
    for job in resumed.jobs:
        assert len(job.job_name) <= 63
        assert layout.parse_job_name(job.job_name) == layout.parse_job_name(job.run_names[0])
        assert job.hyperparameters["run-names"] == job.run_names[0]


@pytest.mark.parametrize(("packing", "expected"), [("per-cell", "300"), ("per-instance", "150")])
def test_early_stop_watches_at_most_half_of_each_batch_sizes_share_of_the_runtime(packing, expected) -> None:
    p = plan(mode="early-stop", packing=packing, batch_sizes=[256, 512], max_runtime_seconds=600)
    assert {j.hyperparameters[hp.EARLY_STOP_MAX_SECONDS] for j in p.jobs} == {expected}


def test_an_explicit_early_stop_cap_is_kept() -> None:
    spec = make_spec(mode="early-stop", max_runtime_seconds=600)
    spec["workload"]["hyperparameters"] = {hp.EARLY_STOP_MAX_SECONDS: 42}
    p = plan_sweep(spec, now=NOW, price=table_price)
    assert {j.hyperparameters[hp.EARLY_STOP_MAX_SECONDS] for j in p.jobs} == {"42"}


def test_full_mode_jobs_get_no_early_stop_cap() -> None:
    assert all(hp.EARLY_STOP_MAX_SECONDS not in j.hyperparameters for j in plan().jobs)


def test_instance_counts_is_an_axis_of_jobs_named_and_costed_per_count() -> None:
    p = plan(instance_types=["ml.p3.2xlarge"], batch_sizes=[256], instance_counts=[1, 2, 4])
    assert [(j.instance_count, j.vmtype) for j in p.jobs] == [(1, "p3-1"), (2, "p3-1x2"), (4, "p3-1x4")]
    assert [layout.parse_job_name(j.job_name).vmtype for j in p.jobs] == ["p3-1", "p3-1x2", "p3-1x4"]
    assert len({j.job_name for j in p.jobs}) == 3
    single = plan(instance_types=["ml.p3.2xlarge"], batch_sizes=[256])
    assert p.worst_case_cost_usd == pytest.approx(single.worst_case_cost_usd * (1 + 2 + 4))


def test_instance_counts_and_instance_count_are_not_given_together() -> None:
    assert fields_of(make_spec(instance_count=2, instance_counts=[1, 2])) == ["instance_counts"]
    synthetic = {"model": "mnist-cnn", "synthetic": True}
    assert fields_of(make_spec(instance_types=["local_gpu"], instance_counts=[1, 2], workload=synthetic)) == [
        "instance_counts"
    ]


# ---- training_job: network and storage of every request ---------------------------------------------


def test_training_job_settings_go_into_every_job_and_defaults_stay_out_of_spec_json():
    from trainsweep.spec import plan_sweep

    base = {
        "name": "t",
        "workload": {"entry_point": "train.py", "source_dir": "s3://b/sweeps/x/code/s.tar.gz"},
        "instance_types": ["ml.g5.xlarge"],
        "batch_sizes": [32],
    }
    plain = load_spec(base)
    assert "training_job" not in plain.to_dict()
    job = plan_sweep(plain, region="us-east-1", bucket="b", cloud=True).jobs[0]
    assert (job.volume_size_gb, job.input_mode, job.network_isolation) == (50, "File", False)
    assert "vpc_config" not in job.to_json()
    vpc = {"subnets": ["subnet-1"], "security_group_ids": ["sg-1"]}
    spec = load_spec({**base, "training_job": {"input_mode": "Pipe", "volume_size_gb": 900, "vpc": vpc}})
    job = plan_sweep(spec, region="us-east-1", bucket="b", cloud=True).jobs[0]
    assert job.to_json()["vpc_config"] == {"Subnets": ["subnet-1"], "SecurityGroupIds": ["sg-1"]}
    assert (job.volume_size_gb, job.input_mode) == (900, "Pipe")
    assert spec.to_dict()["training_job"]["volume_size_gb"] == 900


def test_pipe_mode_is_refused_for_the_built_in_workloads_that_read_files():
    with pytest.raises(SpecError, match=r"training_job\.input_mode"):
        load_spec(
            {
                "name": "t",
                "workload": {"model": "mnist-cnn", "epochs": 1},
                "instance_types": ["ml.g5.xlarge"],
                "batch_sizes": [32],
                "training_job": {"input_mode": "Pipe"},
            }
        )


@pytest.mark.parametrize(
    "bad", [{"vpc": {"subnets": [], "security_group_ids": ["sg-1"]}}, {"volume_size_gb": 0}]
)
def test_training_job_settings_sagemaker_would_refuse_are_refused(bad):
    spec = {
        "name": "t",
        "workload": {"model": "mnist-cnn", "epochs": 1},
        "instance_types": ["ml.g5.xlarge"],
        "batch_sizes": [32],
        "training_job": bad,
    }
    with pytest.raises(SpecError, match="training_job"):
        load_spec(spec)
