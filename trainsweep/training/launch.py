"""Launching a cell's process: the built-in worker, or the user's script under trainsweep's instrumentation.

A script job (hyperparameter ``sagemaker_program``) is launched the way SageMaker's PyTorch container
launches one: its source dir is fetched (``sagemaker_submit_directory``, a ``sourcedir.tar.gz``) into
``<base>/code``, its requirements are pip-installed, and the script runs there with the ``SM_*``
environment and its hyperparameters as ``--name value`` arguments (:mod:`trainsweep.training.contract`),
under ``torchrun`` when the instance has several GPUs or the job several hosts. trainsweep adds one
thing: the process starts in :mod:`trainsweep.instrument.bootstrap`, which times the script's steps
without a change to its code. Each batch size of a packed job is one such process.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from trainsweep import axes
from trainsweep import hyperparameters as hp
from trainsweep.predict import StopRule
from trainsweep.sagemaker_contract import Paths, hosts, instance_type, rendezvous
from trainsweep.sourcedir import DEFAULT_REQUIREMENTS
from trainsweep.training import command, contract
from trainsweep.training.config import (
    DEFAULT_LOG_UPLOAD_S,
    MODES,
    Cell,
    JobConfigError,
    cell_settings,
    run_names_hint,
    stop_rule,
)

PIP_TIMEOUT_S = 1800
CODE_DIR = "code"


def visible_gpus(requested: int) -> int:
    """GPUs this process may use: ``nvidia-smi -L`` within ``CUDA_VISIBLE_DEVICES``, capped by ``requested``
    (0 = all)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return 0
    exe = shutil.which("nvidia-smi")
    count = 0
    if exe:
        try:
            out = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=30, check=False)
            count = sum(1 for line in out.stdout.splitlines() if line.startswith("GPU "))
        except (OSError, subprocess.SubprocessError):
            count = 0
        if visible:
            count = min(count, len([v for v in visible.split(",") if v.strip()]))
    return min(requested, count) if requested else count


def per_device(batch_size: int, processes: int) -> int:
    """The global batch size's share of each of ``processes`` training processes.

    Raises:
        JobConfigError: the batch size does not split evenly (a rank would train another size).
    """
    if batch_size % processes:
        raise JobConfigError(
            f"batch size {batch_size} does not split over the job's {processes} processes "
            f"({{batch_size_per_device}}): sweep batch sizes that are multiples of {processes}"
        )
    return batch_size // processes


def launcher_prefix(paths: Paths, gpus: int) -> list[str]:
    """``torchrun`` with one process per GPU (and the hosts of a multi-host job), or [] for one process."""
    all_hosts, current = hosts(paths)
    if gpus <= 1 and len(all_hosts) <= 1:
        return []
    launcher = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={max(gpus, 1)}"]
    if len(all_hosts) > 1:
        master_addr, master_port = rendezvous(all_hosts)
        launcher += [
            f"--nnodes={len(all_hosts)}",
            f"--node_rank={all_hosts.index(current)}",
            f"--master_addr={master_addr}",
            f"--master_port={master_port}",
        ]
    else:
        launcher.append("--standalone")
    return launcher


@dataclass(frozen=True)
class Launch:
    """One process to start: its command, extra environment and working folder."""

    command: list[str]
    env: dict[str, str] = field(default_factory=dict)
    cwd: Path | None = None


# ---- script jobs ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScriptConfig:
    """A script job's settings, read from its hyperparameters."""

    entry_point: str
    submit_directory: str
    cells: tuple[Cell, ...]
    epochs: int
    mode: str
    batch_size_arg: str
    epochs_arg: str | None  # None: the script takes no epochs argument
    requirements: str | None
    rule: StopRule
    max_steps_per_epoch: int | None
    max_eval_batches: int | None
    num_gpus: int
    log_bucket: str | None
    log_prefix: str
    log_upload_s: float
    hyperparameters: dict[str, Any]  # the script's own, decoded
    command: tuple[str, ...] | None = None  # workload.command's words (placeholders unfilled)
    steps: int | None = None  # a step-based run
    steps_arg: str | None = None
    argument_style: str = "space"
    flags: tuple[str, ...] = ()
    arguments: tuple[str, ...] = ()  # an entry point's positional arguments (placeholders unfilled)
    placeholder_values: dict[str, str] = field(default_factory=dict)  # the hyperparameters, as written
    search_min_gain: float | None = None  # batch_sizes: auto (a packed job's batch-size search)

    @property
    def packed(self) -> bool:
        return len(self.cells) > 1

    @property
    def workload(self) -> str:
        return Path(self.entry_point).name


def is_script_job(raw: dict[str, str]) -> bool:
    return bool((raw.get(contract.PROGRAM) or "").strip() or (raw.get(contract.COMMAND) or "").strip())


def _word_list(raw: dict[str, str], key: str) -> tuple[str, ...]:
    """A JSON list of words (``trainsweep-command``, ``-flags``, ``-arguments``); () when unset."""
    text = (raw.get(key) or "").strip()
    if not text:
        return ()
    try:
        words = json.loads(text)
    except ValueError as e:
        raise JobConfigError(f"hyperparameter {key!r} is not a JSON list of words: {e}") from None
    if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
        raise JobConfigError(f"hyperparameter {key!r} must be a JSON list of words, got {text[:200]!r}")
    return tuple(words)


def _as_written(raw: dict[str, str]) -> dict[str, str]:
    """The script's hyperparameters as the job's text (placeholder values): a JSON-quoted string decoded,
    anything else as is (``0.10`` stays ``0.10``, where decoding would give ``0.1``)."""
    out = {}
    for key, text in raw.items():
        if contract.is_reserved(key):
            continue
        value = contract.decode_value(text)
        out[key] = value if isinstance(value, str) else text.strip()
    return out


def _command_settings(raw: dict[str, str], names: list[str]) -> dict[str, Any]:
    """The fields of a command job (or an entry point's argument settings), checked."""
    words = _word_list(raw, contract.COMMAND)
    arguments = _word_list(raw, contract.ARGUMENTS)
    known = [*command.PLACEHOLDERS, *names]
    try:
        command.check([*words, *arguments], known)
        target = command.named_target(list(words)) if words else None
    except command.CommandError as e:
        raise JobConfigError(str(e)) from None
    if words and target is None:
        raise JobConfigError(f"the command {' '.join(words)!r} names no Python script (.py) or -m module")
    style = _text(raw, contract.ARGUMENT_STYLE) or "space"
    if style not in contract.ARGUMENT_STYLES:
        raise JobConfigError(f"unknown argument style {style!r}: use {' or '.join(contract.ARGUMENT_STYLES)}")
    steps = _text(raw, contract.STEPS)
    if steps and (not steps.isdigit() or int(steps) < 1):
        raise JobConfigError(f"{contract.STEPS!r} must be a whole number >= 1, got {steps!r}")
    return {
        "command": words or None,
        "entry": target.name if target else None,
        "arguments": arguments,
        "flags": _word_list(raw, contract.FLAGS),
        "argument_style": style,
        "steps": int(steps) if steps else None,
    }


def _read(raw: dict[str, str], key: str, rule: str, default: Any) -> Any:
    """``raw[key]`` read by the built-ins' rule for hyperparameter ``rule``, or ``default`` when unset."""
    value = raw.get(key)
    if value is None or value.strip() == "":
        return default
    try:
        return hp.parse_value(rule, value)
    except ValueError as exc:
        raise JobConfigError(f"hyperparameter {key!r} {exc}") from None


def _knob(raw: dict[str, str], name: str, default: Any) -> Any:
    """A trainsweep knob of a script job: ``name`` carried as ``trainsweep-<name>``."""
    return _read(raw, contract.TRAINSWEEP_PREFIX + name, name, default)


def _text(raw: dict[str, str], name: str, default: str = "") -> str:
    return str(raw.get(name, default)).strip().strip('"').strip()


def _search_gain(raw: dict[str, str]) -> float | None:
    """``batch_sizes: auto``'s plateau share (``trainsweep-batch-size-search``); None: no search."""
    key = contract.TRAINSWEEP_PREFIX + hp.BATCH_SIZE_SEARCH
    text = _text(raw, key)
    if not text:
        return None
    try:
        gain = float(text)
    except ValueError:
        raise JobConfigError(f"hyperparameter {key!r} must be a number, got {text!r}") from None
    if not 0 <= gain < 1:
        raise JobConfigError(f"hyperparameter {key!r} is a share in [0, 1), got {text!r}")
    return gain


def parse_script_config(raw: dict[str, str]) -> ScriptConfig:
    """Validate a script job's hyperparameters; raises :class:`JobConfigError` with what to fix."""
    written = _as_written(raw)
    names = [n.strip() for n in _text(raw, contract.RUN_NAMES).split(",") if n.strip()]
    cell_axes = cell_settings(raw, max(len(names), 1))
    settings = _command_settings(raw, [*written, *axes.names_of(cell_axes)])
    entry = _text(raw, contract.PROGRAM) or settings["entry"] or ""
    submit = _submit_directory(raw)
    mode = _text(raw, contract.MODE, "full") or "full"
    if mode not in MODES:
        raise JobConfigError(f"unknown mode {mode!r}: use one of {', '.join(MODES)}")
    epochs, sizes = _epochs_and_sizes(raw)
    names = _names_per_size(names, sizes)
    return ScriptConfig(
        entry_point=entry,
        submit_directory=submit,
        cells=tuple(Cell(n, b, tuple(s.items())) for n, b, s in zip(names, sizes, cell_axes, strict=True)),
        epochs=epochs,
        mode=mode,
        batch_size_arg=_text(raw, contract.BATCH_SIZE_ARG) or contract.DEFAULT_BATCH_SIZE_ARG,
        epochs_arg=_text(raw, contract.EPOCHS_ARG, contract.DEFAULT_EPOCHS_ARG) or None,
        requirements=_text(raw, contract.REQUIREMENTS) or None,
        rule=stop_rule(lambda name: _knob(raw, name, None)),
        max_steps_per_epoch=_knob(raw, hp.MAX_STEPS_PER_EPOCH, 0) or None,
        max_eval_batches=_knob(raw, hp.MAX_EVAL_BATCHES, 0) or None,
        num_gpus=_knob(raw, hp.NUM_GPUS, 0),
        log_bucket=_text(raw, hp.LOG_BUCKET) or None,
        log_prefix=_text(raw, hp.LOG_PREFIX),
        log_upload_s=_read(raw, hp.LOG_UPLOAD_SECONDS, hp.LOG_UPLOAD_SECONDS, DEFAULT_LOG_UPLOAD_S),
        hyperparameters=contract.user_hyperparameters(raw),
        command=settings["command"],
        steps=settings["steps"],
        steps_arg=_text(raw, contract.STEPS_ARG, contract.DEFAULT_STEPS_ARG) or None,
        argument_style=settings["argument_style"],
        flags=settings["flags"],
        arguments=settings["arguments"],
        placeholder_values=written,
        search_min_gain=_search_gain(raw),
    )


def _submit_directory(raw: dict[str, str]) -> str:
    submit = _text(raw, contract.SUBMIT_DIRECTORY)
    if not submit:
        raise JobConfigError(
            f"script job without {contract.SUBMIT_DIRECTORY!r}: give the s3:// URI of the sourcedir.tar.gz "
            "(trainsweep run packs and uploads it)"
        )
    return submit


def _epochs_and_sizes(raw: dict[str, str]) -> tuple[int, list[int]]:
    """The epochs of every run and the job's batch sizes, each at least 1."""
    try:
        epochs = int(_text(raw, contract.EPOCHS))
        sizes = [int(s) for s in _text(raw, contract.BATCH_SIZES).split(",") if s.strip()]
    except ValueError:
        raise JobConfigError(
            f"{contract.EPOCHS!r} and {contract.BATCH_SIZES!r} must be whole numbers, got "
            f"{raw.get(contract.EPOCHS)!r} and {raw.get(contract.BATCH_SIZES)!r}"
        ) from None
    if epochs < 1 or not sizes or any(s < 1 for s in sizes):
        raise JobConfigError(f"epochs and batch sizes must be >= 1, got {epochs} and {sizes}")
    return epochs, sizes


def _names_per_size(names: list[str], sizes: list[int]) -> list[str]:
    """One unique run name per batch size (a lone unnamed run gets the hint's name)."""
    if not names and len(sizes) == 1:
        names = run_names_hint({})
    if len(names) != len(sizes) or len(set(names)) != len(names):
        raise JobConfigError(
            f"{contract.RUN_NAMES!r} must name one unique run per batch size: {len(sizes)} batch sizes, "
            f"run names {names}"
        )
    return names


def fetch_source(uri: str, dest: Path) -> None:
    """Fill ``dest`` with the source dir at ``uri``: ``s3://.../sourcedir.tar.gz``, a local archive or folder.

    Raises:
        JobConfigError: the source cannot be read or unpacked.
    """
    from trainsweep.sourcedir import unpack

    parsed = urlparse(uri)
    try:
        if parsed.scheme == "s3":
            import boto3

            body = boto3.client("s3").get_object(Bucket=parsed.netloc, Key=parsed.path.lstrip("/"))["Body"]
            unpack(body.read(), dest)
            return
        path = Path(parsed.path if parsed.scheme == "file" else uri)
        if path.is_dir():
            shutil.copytree(path, dest, dirs_exist_ok=True)
        else:
            unpack(path.read_bytes(), dest)
    except Exception as exc:  # any reason (missing object, no access, bad archive) is the job's bad input
        raise JobConfigError(f"cannot fetch the source dir {uri}: {type(exc).__name__}: {exc}") from None


def install_requirements(code: Path, requirements: str) -> None:
    """``pip install -r`` the script's requirements into this image's Python; raises on failure."""
    cmd = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "-r", requirements]
    print(f"trainsweep: installing {requirements}: {' '.join(cmd)}", flush=True)
    try:
        out = subprocess.run(
            cmd, cwd=code, capture_output=True, text=True, timeout=PIP_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise JobConfigError(f"requirements failed to install ({requirements}): {exc}") from None
    sys.stdout.write(out.stdout[-20_000:])
    sys.stdout.flush()
    if out.returncode != 0:
        tail = [ln for ln in out.stderr.strip().splitlines() if ln.strip()][-3:]
        raise JobConfigError(
            f"requirements failed to install ({requirements}, pip exit code {out.returncode}): "
            + " | ".join(tail)
        )


def resolve_program(word: str, code: Path, search_path: str) -> list[str]:
    """The command's first word as a process starts it: a path inside the source dir, or a program found
    on ``search_path`` (this Python's own folder first, so ``python``, ``torchrun`` and ``accelerate``
    are this environment's, as in an activated virtual environment).

    Raises:
        JobConfigError: the program is not found (the path searched is named).
    """
    if "/" in word:
        path = (code / word).resolve()
        if not path.is_file():
            raise JobConfigError(f"the command's program {word!r} is not in the source dir ({code})")
        return [str(path)]
    found = shutil.which(word, path=search_path)
    if found is None:
        raise JobConfigError(
            f"the command's program {word!r} is not found (searched {search_path}): install it in the "
            "training image (or in this environment for local mode), or name it by a path in the source dir"
        )
    return [found]


def program_search_path() -> str:
    """``PATH`` with this Python's folder first (where pip puts ``torchrun``, ``accelerate``...)."""
    here = str(Path(sys.executable).parent)
    return os.pathsep.join(p for p in (here, os.environ.get("PATH", "")) if p)


class ScriptLauncher:
    """Prepares a script job once (source, requirements) and builds each cell's process."""

    def __init__(self, cfg: ScriptConfig, paths: Paths, workdir: Path) -> None:
        self.cfg = cfg
        self.paths = paths
        self.workdir = workdir  # where the per-cell instrumentation configs go
        self.code = paths.base / CODE_DIR
        self.program: list[str] = []  # a command's program, resolved by prepare()

    def _missing(self, what: str) -> JobConfigError:
        shipped = sorted(p.relative_to(self.code).as_posix() for p in self.code.rglob("*.py"))[:10]
        return JobConfigError(
            f"{what} is not in the source dir ({self.cfg.submit_directory}); "
            f"it holds {', '.join(shipped) or 'no .py files'}"
        )

    def _check_code(self) -> None:
        cfg = self.cfg
        if cfg.command is not None:
            self.program = resolve_program(cfg.command[0], self.code, program_search_path())
            target = command.named_target(list(cfg.command))
            if target is None or target.kind != "script" or Path(target.name).is_absolute():
                return
            script = (self.code / target.name).resolve()
            if not script.is_file() or not script.is_relative_to(self.code.resolve()):
                raise self._missing(f"the script {target.name!r} the command names")
            return
        script = (self.code / cfg.entry_point).resolve()
        if not script.is_file() or not script.is_relative_to(self.code.resolve()):
            raise self._missing(f"entry point {cfg.entry_point!r}")

    def prepare(self) -> None:
        """Fetch the source dir, check the script (and a command's program), install the requirements
        (raises JobConfigError)."""
        cfg = self.cfg
        fetch_source(cfg.submit_directory, self.code)
        self._check_code()
        requirements = cfg.requirements
        if requirements is None and (self.code / DEFAULT_REQUIREMENTS).is_file():
            requirements = DEFAULT_REQUIREMENTS
        if requirements is None:
            return
        if not (self.code / requirements).is_file():
            raise JobConfigError(f"requirements file {requirements!r} is not in the source dir")
        if os.environ.get(contract.INSTALL_REQUIREMENTS_ENV, "1") == "0":
            print(f"trainsweep: {requirements} not installed (checked before the sweep started)", flush=True)
            return
        install_requirements(self.code, requirements)

    def hyperparameters(self, cell: Cell) -> dict[str, Any]:
        """The script's hyperparameters for one batch size: its own plus the sweep's batch size and epochs
        (or steps), under the script's argument names; a command's are its own only."""
        hps = {**self.cfg.hyperparameters, **cell.setting}
        if self.cfg.command is not None:
            return hps
        hps[self.cfg.batch_size_arg] = cell.batch_size
        if self.cfg.steps is not None:
            if self.cfg.steps_arg:
                hps[self.cfg.steps_arg] = self.cfg.steps
        elif self.cfg.epochs_arg:
            hps[self.cfg.epochs_arg] = self.cfg.epochs
        return hps

    def values(self, cell: Cell, site: contract.ScriptSite) -> dict[str, str]:
        """The placeholders' values of one cell: the hyperparameters as written, then the sweep's.

        Raises:
            JobConfigError: the command takes a per-device batch size that the job's processes cannot share.
        """
        cfg = self.cfg
        values = dict(cfg.placeholder_values)
        values.update({name: axes.text(value) for name, value in cell.setting.items()})
        per_host = max(site.num_gpus, 1)  # one process per GPU, one on a CPU
        master_addr, master_port = rendezvous(site.hosts)
        values.update(
            {
                command.BATCH_SIZE: str(cell.batch_size),
                command.EPOCHS: str(cfg.epochs),
                command.INSTANCE_COUNT: str(len(site.hosts)),
                command.GPUS: str(per_host),
                command.NODE_RANK: str(site.hosts.index(site.current_host)),
                command.MASTER_ADDR: master_addr,
                command.MASTER_PORT: master_port,
            }
        )
        if command.BATCH_SIZE_PER_DEVICE in command.placeholders(cfg.command or cfg.arguments):
            share = per_device(cell.batch_size, len(site.hosts) * per_host)
            values[command.BATCH_SIZE_PER_DEVICE] = str(share)
        if cfg.steps is not None:
            values[command.STEPS] = str(cfg.steps)
        return values

    def _site(self, gpus: int) -> contract.ScriptSite:
        cfg, paths = self.cfg, self.paths
        all_hosts, current = hosts(paths)
        channels = sorted(p.name for p in (paths.base / "input" / "data").glob("*") if p.is_dir())
        return contract.ScriptSite(
            base=paths.base,
            entry_point=cfg.entry_point,
            module_dir=cfg.submit_directory,
            hosts=all_hosts,
            current_host=current,
            num_gpus=gpus,
            num_cpus=os.cpu_count() or 1,
            channels=[c for c in channels if c != "download"],
            instance_type=instance_type(paths),
        )

    def _instrument(self, index: int, site: contract.ScriptSite) -> Path:
        """Write the cell's :class:`~trainsweep.training.contract.InstrumentConfig`; returns its path."""
        cfg, paths = self.cfg, self.paths
        cell = cfg.cells[index]
        instrument = contract.InstrumentConfig(
            run_name=cell.run_name,
            batch_size=cell.batch_size,
            epochs=cfg.epochs,
            log_file=str(paths.log_file(cell.run_name)),
            status_file=str(contract.cell_status_path(paths.output, cell.run_name)),
            prediction_file=str(paths.prediction_file(cell.run_name)),
            mode=cfg.mode,
            workload=cfg.workload,
            rule=dict(cfg.rule.__dict__),
            max_steps_per_epoch=cfg.max_steps_per_epoch,
            max_eval_batches=cfg.max_eval_batches,
            instance_type=site.instance_type,
            batch_size_arg=cfg.batch_size_arg,
            steps=cfg.steps,
        )
        config_file = self.workdir / f"instrument-{index}.json"
        config_file.write_text(instrument.to_json())
        return config_file

    def launch(self, index: int) -> Launch:
        cfg = self.cfg
        cell = cfg.cells[index]
        gpus = visible_gpus(cfg.num_gpus)
        site = self._site(gpus)
        hps = self.hyperparameters(cell)
        values = self.values(cell, site)
        if cfg.command is not None:
            words = command.render(cfg.command, values)
            env = contract.sm_env(site, hps)
            env.update(injection_env(self.code, cfg.command))
            env[contract.INSTRUMENT_ENV] = str(self._instrument(index, site))
            return Launch([*(self.program or [words[0]]), *words[1:]], env, self.code)
        args = contract.user_args(
            hps,
            style=cfg.argument_style,
            flags=cfg.flags,
            arguments=command.render(cfg.arguments, values),
        )
        env = contract.sm_env(site, hps, args=args)
        env[contract.INSTRUMENT_ENV] = str(self._instrument(index, site))
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(self.code), os.environ.get("PYTHONPATH")) if p)
        script = str(self.code / cfg.entry_point)
        launcher = launcher_prefix(self.paths, gpus) or [sys.executable]
        return Launch([*launcher, "-m", "trainsweep.instrument.bootstrap", script, *args], env, self.code)


def injection_env(code: Path, words: tuple[str, ...]) -> dict[str, str]:
    """The environment that times a command's script in whatever process runs it: the injection folder
    first on ``PYTHONPATH`` (:mod:`trainsweep.instrument.inject`), the script (or module) it is to time,
    and this Python's folder first on ``PATH``."""
    from trainsweep.instrument.inject import SITE_DIR

    path = [str(SITE_DIR), str(code), os.environ.get("PYTHONPATH", "")]
    env = {"PYTHONPATH": os.pathsep.join(p for p in path if p), "PATH": program_search_path()}
    target = command.named_target(list(words))
    if target is not None and target.kind == "script":
        env[contract.COMMAND_SCRIPT_ENV] = str((code / target.name).resolve())
    elif target is not None:
        env[contract.COMMAND_MODULE_ENV] = target.name
    return env
