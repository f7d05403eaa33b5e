"""The command form (``workload.command``) and an entry point's arguments, from the spec to the job.

What a user writes is checked at plan time (placeholders, braces, steps against epochs, the script the
command names) and turned into the words each cell runs; nothing of it ever goes through a shell.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from trainsweep.cli import app
from trainsweep.errors import SpecError
from trainsweep.instrument.inject import MainProgram, bootstrap_argv, is_target, main_program
from trainsweep.spec import load_spec, plan_sweep
from trainsweep.training import command, contract

NANOGPT = (
    "python train.py config/train_shakespeare_char.py --device=cpu --batch_size={batch_size} "
    "--max_iters={steps}"
)
runner = CliRunner()


def _spec(workload: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"name": "c", "workload": workload, "instance_types": ["local"], "batch_sizes": [8, 16], **extra}


def _errors(workload: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(SpecError) as caught:
        load_spec(_spec(workload))
    return dict(caught.value.errors)


def _job_hyperparameters(workload: dict[str, Any]) -> dict[str, str]:
    return dict(plan_sweep(_spec(workload)).jobs[0].hyperparameters)


# ---- the template -------------------------------------------------------------------------------------


def test_a_command_is_split_like_a_shell_and_each_word_filled_on_its_own():
    words = command.split("python train.py --name 'a b' --bs={batch_size} --tag=x{tag}y")
    assert words == ["python", "train.py", "--name", "a b", "--bs={batch_size}", "--tag=x{tag}y"]
    assert command.render(words, {"batch_size": "32", "tag": "1"})[-2:] == ["--bs=32", "--tag=x1y"]


def test_a_value_with_shell_syntax_stays_one_literal_argument():
    words = command.split("python train.py --note={note}")
    hostile = "x; rm -rf / $(touch pwned) `id` && echo"
    assert command.render(words, {"note": hostile}) == ["python", "train.py", f"--note={hostile}"]


def test_doubled_braces_are_literal_braces():
    words = command.split("""python train.py '--json={{"bs":{batch_size}}}'""")
    assert command.render(words, {"batch_size": "8"})[-1] == '--json={"bs":8}'


def test_a_lone_brace_says_how_to_write_a_literal_one():
    with pytest.raises(command.CommandError, match=r"write a literal brace as \{\{ or \}\}"):
        command.placeholders(["--x={batch_size"])


def test_an_unknown_placeholder_is_named_with_the_known_ones():
    with pytest.raises(command.CommandError) as caught:
        command.check(["--lr={learning_rate}"], [*command.PLACEHOLDERS, "lr"])
    message = str(caught.value)
    assert "unknown placeholder {learning_rate}" in message
    assert "{batch_size}, {epochs}, {steps}, {instance_count}, {gpus}, {batch_size_per_device}" in message
    assert "{node_rank}, {master_addr}, {master_port}, {lr}" in message


def test_attribute_and_index_lookups_are_not_placeholders():
    for word in ("{batch_size.__class__}", "{batch_size[0]}", "{0}", "{}"):
        with pytest.raises(command.CommandError, match="unknown placeholder"):
            command.check([word], command.PLACEHOLDERS)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("python train.py config/train_shakespeare_char.py", command.Target("script", "train.py")),
        ("torchrun --standalone --nproc_per_node={gpus} multigpu_torchrun.py 50 10",
         command.Target("script", "multigpu_torchrun.py")),
        ("accelerate launch --mixed_precision=fp16 src/train.py --x=a.py",
         command.Target("script", "src/train.py")),
        ("python -u -m torch.distributed.run --nproc_per_node=2 main.py",
         command.Target("script", "main.py")),
        ("python -m mypkg.train --epochs {epochs}", command.Target("module", "mypkg.train")),
        ("torchrun --nproc_per_node=2 -m mypkg.train", command.Target("module", "mypkg.train")),
        ("./run.sh --x 1", None),
    ],
)  # fmt: skip
def test_the_script_a_command_names_is_found_for_any_launcher(line, expected):
    assert command.named_target(command.split(line)) == expected


# ---- the spec -----------------------------------------------------------------------------------------


def test_a_command_spec_plans_a_job_with_its_words_and_steps():
    hyper = _job_hyperparameters(
        {"command": NANOGPT + " --lr={lr}", "steps": 40, "hyperparameters": {"lr": 1e-3}}
    )
    assert json.loads(hyper[contract.COMMAND]) == [*command.split(NANOGPT), "--lr={lr}"]
    assert hyper[contract.STEPS] == "40"
    assert hyper[contract.SUBMIT_DIRECTORY] == "."  # the spec file's folder
    assert hyper["lr"] == "0.001"
    assert contract.PROGRAM not in hyper
    assert "batch-size" not in hyper and "epochs" not in hyper  # the command passes its own arguments


def test_an_unknown_placeholder_fails_the_plan_naming_it():
    errors = _errors({"command": "python train.py --batch_size={batchsize}"})
    assert "unknown placeholder {batchsize}" in errors["workload.command"]


def test_steps_in_a_command_needs_workload_steps():
    errors = _errors({"command": "python train.py --max_iters={steps}"})
    assert errors["workload.command"] == "uses {steps}: set workload.steps (a step-based run)"


def test_epochs_in_a_step_based_command_is_refused():
    errors = _errors({"command": "python train.py --epochs={epochs}", "steps": 10})
    assert "step-based" in errors["workload.command"]


def test_steps_and_epochs_together_are_refused():
    errors = _errors({"command": "python train.py --n={steps}", "steps": 10, "epochs": 2})
    assert "give one" in errors["workload.steps"]


def test_steps_is_refused_for_a_built_in():
    errors = _errors({"model": "mnist-cnn", "steps": 10})
    assert "steps is for your own code" in errors["workload.steps"]


def test_command_and_entry_point_together_are_refused():
    errors = _errors({"command": "python a.py", "entry_point": "a.py"})
    assert "either command or entry_point" in errors["workload.command"]


def test_an_entry_point_setting_with_a_command_is_refused():
    errors = _errors({"command": "python a.py --bs={batch_size}", "argument_style": "equals"})
    assert "write the arguments in it" in errors["workload.argument_style"]


def test_a_hyperparameter_named_like_a_sweep_placeholder_is_refused():
    errors = _errors({"command": "python a.py --bs={batch_size}", "hyperparameters": {"gpus": 2}})
    assert "{gpus} is set by the sweep" in errors["workload.hyperparameters.gpus"]


def test_a_command_that_names_no_python_program_is_refused():
    errors = _errors({"command": "bash run.sh {batch_size}"})
    assert "names no Python script to time" in errors["workload.command"]


def test_an_unbalanced_quote_is_refused_with_shlexs_words():
    errors = _errors({"command": "python a.py --name 'oops"})
    assert "No closing quotation" in errors["workload.command"]


def test_plan_warns_about_what_a_command_leaves_out():
    plan = plan_sweep(_spec({"command": "python a.py --lr={lr}", "hyperparameters": {"lr": 0.1, "wd": 0}}))
    assert any("has no {batch_size}" in w for w in plan.warnings)
    assert any(w.startswith("workload.hyperparameters.wd: the command has no {wd}") for w in plan.warnings)


# ---- an entry point's arguments -------------------------------------------------------------------------


def test_an_entry_points_style_flags_and_arguments_reach_the_job():
    hyper = _job_hyperparameters(
        {
            "entry_point": "main.py",
            "argument_style": "equals",
            "flags": ["use-optimizer", "tied"],
            "arguments": ["config/x.py"],
            "epochs_arg": None,
            "batch_size_arg": "batch_size",
            "hyperparameters": {"tied": False, "lr": 20},
        }
    )
    assert hyper[contract.ARGUMENT_STYLE] == "equals"
    assert json.loads(hyper[contract.FLAGS]) == ["use-optimizer", "tied"]
    assert json.loads(hyper[contract.ARGUMENTS]) == ["config/x.py"]
    assert hyper[contract.EPOCHS_ARG] == ""
    assert "epochs" not in hyper and "None" not in hyper


def test_a_flag_with_a_value_that_is_not_a_boolean_is_refused():
    errors = _errors({"entry_point": "main.py", "flags": ["tied"], "hyperparameters": {"tied": "yes"}})
    assert "a flag is true (--tied) or false (left out)" in errors["workload.hyperparameters.tied"]


def test_a_step_based_entry_point_gets_its_steps_argument_and_no_epochs():
    hyper = _job_hyperparameters({"entry_point": "main.py", "steps": 30, "steps_arg": "max-iters"})
    assert hyper["max-iters"] == "30"
    assert "epochs" not in hyper
    assert hyper[contract.STEPS] == "30"


@pytest.mark.parametrize(
    ("style", "expected"),
    [
        ("space", ["cfg.py", "--batch_size", "8", "--lr", "0.1", "--use-optimizer", "-v", "1"]),
        ("equals", ["cfg.py", "--batch_size=8", "--lr=0.1", "--use-optimizer", "--v=1"]),
    ],
)
def test_user_args_in_either_style_with_flags_and_positionals(style, expected):
    hps = {"batch_size": 8, "lr": 0.1, "use-optimizer": True, "tied": False, "v": 1}
    args = contract.user_args(hps, style=style, flags=("use-optimizer", "tied"), arguments=("cfg.py",))
    assert args == expected


def test_user_args_default_is_sagemakers():
    assert contract.user_args({"epochs": 2, "b": "x"}) == ["-b", "x", "--epochs", "2"]


# ---- plan checks the source dir ---------------------------------------------------------------------------


def _write_spec(folder: Path, workload: str) -> Path:
    path = folder / "sweep.yaml"
    path.write_text(f"name: t\nworkload: {workload}\ninstance_types: [local]\nbatch_sizes: [32]\n")
    return path


def test_plan_refuses_a_command_whose_script_is_not_in_the_source_dir(tmp_path):
    (tmp_path / "train.py").write_text("print(1)\n")
    result = runner.invoke(
        app, ["plan", str(_write_spec(tmp_path, "{command: 'python trian.py --b={batch_size}'}"))]
    )
    out = " ".join(result.output.split())
    assert result.exit_code == 2, out
    assert "workload.command: names the script 'trian.py', which is not in the source dir" in out
    assert "train.py" in out


def test_plan_refuses_an_entry_point_missing_from_its_folder(tmp_path):
    result = runner.invoke(app, ["plan", str(_write_spec(tmp_path, "{entry_point: trian.py}"))])
    assert result.exit_code == 2
    assert "workload.entry_point: 'trian.py' not found" in " ".join(result.output.split())


def test_plan_accepts_a_command_whose_script_is_there_and_shows_its_steps(tmp_path):
    (tmp_path / "train.py").write_text("print(1)\n")
    workload = "{command: 'python train.py --b={batch_size} --n={steps}', steps: 40}"
    result = runner.invoke(app, ["plan", str(_write_spec(tmp_path, workload))])
    assert result.exit_code == 0, result.output
    assert "train.py (40 steps, full)" in " ".join(result.output.split())


@pytest.mark.parametrize(
    ("instance_type", "expected"),
    [
        ("local", "15 do not split over the 2 processes of local x2"),  # one process per CPU host
        ("ml.g5.12xlarge", "15, 20 do not split over the 8 processes of ml.g5.12xlarge x2"),  # 4 GPUs each
    ],
)
def test_plan_refuses_batch_sizes_the_processes_cannot_share_per_device(tmp_path, instance_type, expected):
    (tmp_path / "train.py").write_text("print(1)\n")
    spec = tmp_path / "sweep.yaml"
    spec.write_text(
        "name: t\n"
        "workload: {command: 'torchrun --nproc_per_node={gpus} train.py --bs={batch_size_per_device}'}\n"
        f"instance_types: [{instance_type}]\ninstance_count: 2\nbatch_sizes: [15, 16, 20]\n"
    )
    result = runner.invoke(app, ["plan", str(spec)])
    out = " ".join(result.output.split())
    assert result.exit_code == 2, out
    assert expected in out


def test_a_per_device_batch_size_is_the_sweeps_batch_size_for_the_warning():
    workload = {"command": "python train.py --bs={batch_size_per_device}"}
    warnings = plan_sweep(_spec(workload)).warnings
    assert not any("has no {batch_size}" in w for w in warnings)


# ---- which process is timed -----------------------------------------------------------------------------


def test_the_main_program_of_a_process_is_read_from_its_command_line():
    assert main_program(["train.py", "--x"], ["/py", "-u", "train.py", "--x"]) == MainProgram(
        "script", "train.py", ("-u",), ("--x",)
    )
    assert main_program(["-m", "--x"], ["/py", "-X", "dev", "-m", "pkg.train", "--x"]) == MainProgram(
        "module", "pkg.train", ("-X", "dev"), ("--x",)
    )
    assert main_program(["-c"], ["/py", "-c", "from multiprocessing.spawn import spawn_main"]) is None


def test_only_the_named_script_is_the_target_not_its_launcher(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("")
    env = {contract.COMMAND_SCRIPT_ENV: str(script)}
    launcher = main_program(["/venv/bin/torchrun", "train.py"], ["/py", "/venv/bin/torchrun", "train.py"])
    assert launcher is not None and not is_target(launcher, env)
    rank = MainProgram("script", str(script), ("-u",), ("--b=8",))
    assert is_target(rank, env)
    assert bootstrap_argv("/py", rank) == [
        "/py",
        "-u",
        "-m",
        "trainsweep.instrument.bootstrap",
        str(script),
        "--b=8",
    ]


def test_a_planned_command_spec_validates_again_as_the_state_machine_reads_it():
    spec = load_spec(_spec({"command": "python a.py --bs={batch_size} --n={steps}", "steps": 5}))
    again = load_spec(spec.to_dict())  # spec.json holds every field, defaults included
    assert again.workload.command == spec.workload.command and again.workload.steps == 5


def test_an_entry_points_batch_size_and_length_arguments_must_differ():
    errors = _errors({"entry_point": "main.py", "steps": 5, "steps_arg": "batch-size"})
    assert errors["workload.steps_arg"] == "the batch size and the steps need two argument names"
    plan_sweep(_spec({"entry_point": "main.py", "epochs_arg": "steps"}))  # no steps: steps_arg unused
