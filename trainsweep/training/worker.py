"""The training worker: one batch size of one job, on one rank (``python -m trainsweep.training.worker``).

The supervisor starts one worker per batch size (torchrun starts one per GPU), so an out-of-memory
batch size costs only its own process. The worker appends to its run's log as it goes and, on rank 0,
leaves a status file for the supervisor. Exit codes: 0 done, 2 bad input, 3 out of memory, 1 other
error, 143 stopped by SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from trainsweep import image, instances
from trainsweep.instrument import flops
from trainsweep.logs import mllog
from trainsweep.predict import SteadyState, container_family, predict_run, steady_estimate
from trainsweep.sagemaker_contract import Paths, instance_type
from trainsweep.training import contract, loader
from trainsweep.training.config import TRAIN_CHANNEL, Cell, JobConfig, JobConfigError
from trainsweep.training.data import DATASETS, Batches, SyntheticBatches, load_arrays
from trainsweep.training.models import build_model
from trainsweep.training.precision import PrecisionInfeasibleError, check_forward, choose
from trainsweep.training.runlog import RunLog
from trainsweep.training.timeline import RunFacts, RunWriter, gpu_memory
from trainsweep.training.timing import StepClock

EXIT_OK, EXIT_ERROR, EXIT_BAD_INPUT, EXIT_OOM, EXIT_STOPPED = (
    contract.EXIT_OK, contract.EXIT_ERROR, contract.EXIT_BAD_INPUT, contract.EXIT_OOM, contract.EXIT_STOPPED,
)  # fmt: skip
MEMORY_LIMIT_ENV = "TRAINSWEEP_MEMORY_LIMIT_MB"
"""Tests: cap the worker's extra address space once the model is built (a small machine's memory)."""
DDP_AGREE_EVERY = contract.DDP_AGREE_EVERY


class StoppedError(Exception):
    """SIGTERM arrived (StopTrainingJob, MaxRuntimeExceeded, or local mode's stop)."""


def _on_sigterm(signum: int, frame: Any) -> None:
    raise StoppedError("stopped by SIGTERM")


@dataclass(frozen=True)
class Rank:
    rank: int = 0
    local_rank: int = 0
    world_size: int = 1

    @classmethod
    def from_env(cls) -> Rank:
        return cls(
            int(os.environ.get("RANK", "0")),
            int(os.environ.get("LOCAL_RANK", "0")),
            int(os.environ.get("WORLD_SIZE", "1")),
        )


class UnusableGpuError(JobConfigError):
    """The job has GPUs this process's torch cannot use: the cell fails rather than train on the CPU."""


def expected_gpus(paths: Paths) -> int:
    """GPUs this job's instance has: ``SM_NUM_GPUS`` when set, else the catalogue's count for its type."""
    try:
        said = contract.job_gpus_said()
    except ValueError as e:
        raise JobConfigError(str(e)) from None
    if said is not None:
        return said
    itype = instance_type(paths)
    known = instances.CATALOGUE.get(itype) if itype else None
    return known.gpus if known is not None else 0


def _device(rank: Rank, gpus: int = 0, itype: str | None = None) -> torch.device:
    """This rank's GPU, or the CPU on an instance without GPUs; raises :class:`UnusableGpuError` when the
    instance has ``gpus`` GPUs that torch cannot use (no CUDA in this build, no driver, or no kernels for
    their compute capability): CPU timings labelled with a GPU instance type would be wrong answers."""
    where = f"{itype} has {gpus} GPU(s)" if itype else f"the job has {gpus} GPU(s) (SM_NUM_GPUS)"
    if not torch.cuda.is_available():
        if gpus > 0:
            why = "this torch has no CUDA" if torch.version.cuda is None else "torch.cuda cannot see any GPU"
            raise UnusableGpuError(
                f"{where} but {why} (torch {torch.__version__}, CUDA {torch.version.cuda}); refusing to "
                "train on the CPU instead"
            )
        return torch.device("cpu")
    torch.cuda.set_device(rank.local_rank)
    device = torch.device("cuda", rank.local_rank)
    capability = torch.cuda.get_device_capability(device)
    arch_list = torch.cuda.get_arch_list()
    # Only a CUDA build's sm_/compute_ list says what runs (ROCm builds list gfx targets instead).
    if torch.version.cuda is not None and arch_list and not image.runs_on(capability, arch_list):
        raise UnusableGpuError(
            f"{where} but this torch ({torch.__version__}, CUDA {torch.version.cuda}) has no kernels for "
            f"{torch.cuda.get_device_name(device)} (compute capability {capability[0]}.{capability[1]}; "
            f"it has {', '.join(arch_list) or 'none'}); refusing to train on the CPU instead"
        )
    return device


def _default_lr(workload: str, batch_size: int) -> float:
    # linear scaling from the usual base learning rates at batch 256
    base = 0.1 if workload == "resnet50-cifar10" else 0.05
    return base * batch_size / 256


class CellRun:
    """Trains (or early-stops) one batch size; its log is written by :mod:`trainsweep.training.timeline`."""

    def __init__(self, cfg: JobConfig, cell: Cell, paths: Paths, rank: Rank, log: RunLog):
        self.cfg, self.cell, self.paths, self.rank = cfg, cell, paths, rank
        self.writer = RunWriter(log, rank=rank.rank)
        self.primary = rank.rank == 0
        self.epoch = 0
        self.monitor: SteadyState | None = None

    def _on_step(self, n: int, step_s: float, wait_s: float, compute_s: float) -> None:
        self.writer.step(self.epoch, n, step_s, wait_s, compute_s)
        if self.monitor is not None:
            self.monitor.add(step_s)

    # ---- set-up ----------------------------------------------------------------------------------

    def setup(self) -> float:
        """Data, model, precision and optimizer on this rank's device; returns the initialisation time."""
        cfg, cell, rank = self.cfg, self.cell, self.rank
        t0 = time.perf_counter()
        self.writer.init_start()
        if cell.batch_size % rank.world_size:
            raise JobConfigError(
                f"batch size {cell.batch_size} does not split evenly over {rank.world_size} GPUs/ranks; "
                f"use a multiple of {rank.world_size}"
            )
        self.itype = instance_type(self.paths)
        self.device = _device(rank, expected_gpus(self.paths), self.itype)
        torch.manual_seed(cfg.seed)
        self.info = DATASETS[cfg.workload]
        self.train_data, self.eval_data = loader.through_workers(
            *self._data(cell.batch_size // rank.world_size), cfg.num_workers_of(cell), cfg.seed
        )
        self._build_model()
        self.flops = self._count_flops() if self.primary else None
        self.clock = StepClock(self.device, self._on_step)
        init_s = time.perf_counter() - t0
        limit = os.environ.get(MEMORY_LIMIT_ENV)
        if limit:
            _limit_address_space(int(limit))
        return init_s

    def _data(self, per_rank: int) -> tuple[Batches, Batches]:
        """The training and evaluation batches of this rank: synthetic, or the dataset on the device."""
        cfg, rank = self.cfg, self.rank
        if cfg.synthetic:
            mk = dict(batch_size=per_rank, device=self.device, seed=cfg.seed, rank=rank.rank,
                      world_size=rank.world_size, train_samples=cfg.synthetic_samples)  # fmt: skip
            return (
                SyntheticBatches(self.info, train=True, **mk),  # type: ignore[arg-type]
                SyntheticBatches(self.info, train=False, **mk),  # type: ignore[arg-type]
            )
        arr = load_arrays(
            cfg.workload,
            channel=self.paths.channel(TRAIN_CHANNEL),
            allow_download=cfg.download,
            cache=self.paths.base / "input" / "data" / "download",
        )
        common = dict(batch_size=per_rank, info=self.info, seed=cfg.seed, rank=rank.rank,
                      world_size=rank.world_size)  # fmt: skip

        def on_device(x: Any) -> torch.Tensor:
            return torch.from_numpy(x).to(self.device)

        return (
            Batches(on_device(arr.x_train), on_device(arr.y_train), train=True, **common),  # type: ignore[arg-type]
            Batches(on_device(arr.x_test), on_device(arr.y_test), train=False, **common),  # type: ignore[arg-type]
        )

    def _build_model(self) -> None:
        """The model in the cell's precision (checked on one batch), its DDP and compile wrappers, the
        optimizer and the loss."""
        cfg, cell, rank = self.cfg, self.cell, self.rank
        model = build_model(cfg.workload).to(self.device)
        if self.device.type == "cuda":
            torch.backends.cudnn.benchmark = True
        self.precision = choose(cfg.dtype_of(cell), self.device)
        probe = next(iter(self.eval_data))[0]
        model.eval()  # the probe leaves batch-norm statistics as they were
        self.precision_used = check_forward(self.precision, lambda: model(probe))
        model.train()
        self.net = model
        """The model itself (what is saved), under the DDP and compile wrappers of :attr:`model`."""
        self.model: nn.Module = model
        if rank.world_size > 1:
            ids = [rank.local_rank] if self.device.type == "cuda" else None
            self.model = nn.parallel.DistributedDataParallel(model, device_ids=ids)
        if cfg.compile_of(cell):
            self.model = torch.compile(self.model)  # type: ignore[assignment]
        lr = cfg.learning_rate or _default_lr(cfg.workload, cell.batch_size)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=lr, momentum=0.9, weight_decay=5e-4)
        self.loss = nn.CrossEntropyLoss()

    def facts(self) -> RunFacts:
        """The run's header."""
        cfg, rank = self.cfg, self.rank
        gpus = torch.cuda.device_count() if self.device.type == "cuda" else 0
        return RunFacts(
            workload=cfg.workload,
            global_batch_size=self.cell.batch_size,
            train_samples=self._epoch_samples(self.train_data, cfg.max_steps_per_epoch),
            eval_samples=self._epoch_samples(self.eval_data, cfg.max_eval_batches),
            epochs=cfg.epochs,
            gpus=gpus,
            world_size=rank.world_size,
            platform=torch.cuda.get_device_name(self.device) if gpus else "cpu",
            command_line=" ".join(sys.argv),
            instance_type=self.itype or None,
            mode=cfg.mode,
            seed=cfg.seed,
            precision=self.precision_used,
        )

    def _count_flops(self) -> dict[str, Any]:
        """The model's FLOPs per training step, counted once on the meta device (no timed step pays), in
        set-up: before the test memory cap, which measures the training alone."""
        cfg, world = self.cfg, self.rank.world_size
        return flops.builtin_event(
            lambda: build_model(cfg.workload), self.info.shape, batch=self.cell.batch_size // world,
            dtype=self.precision_used, device=self.device, world_size=world,
        )  # fmt: skip

    def _epoch_samples(self, data: Batches, cap: int | None) -> int:
        """Samples in one epoch (all ranks); a step cap (tests, quick runs) makes the epoch that much."""
        per_rank = data.samples if cap is None else min(data.samples, cap * data.batch_size)
        return per_rank * self.rank.world_size

    # ---- training --------------------------------------------------------------------------------

    def _train_steps(self, max_steps: int | None, stop_check: bool) -> bool:
        """One epoch's steps (or up to ``max_steps``); returns True when early-stop says stop."""
        self.model.train()
        clock = self.clock
        clock.epoch_start()
        for i, (x, y) in enumerate(self.train_data):
            if max_steps is not None and i >= max_steps:
                break
            clock.data_ready()
            self._step(x, y)
            clock.step_end()
            if stop_check and self._should_stop(i + 1):
                return True
        return False

    def _step(self, x: torch.Tensor, y: torch.Tensor) -> None:
        with self.precision.autocast():
            out = self.model(x)
            loss = self.loss(out, y)
        self.optimizer.zero_grad(set_to_none=True)
        self.precision.backward_and_step(loss, self.optimizer)

    def _forward(self, x: torch.Tensor) -> torch.Tensor:
        """The model's output for ``x`` in the cell's precision (evaluation)."""
        with self.precision.autocast():
            return self.model(x)

    def _should_stop(self, steps_in_epoch: int) -> bool:
        assert self.monitor is not None
        local = self.monitor.stop_reason() is not None
        if self.rank.world_size == 1:
            return local
        if steps_in_epoch % DDP_AGREE_EVERY:
            return False
        flag = torch.tensor([1.0 if local else 0.0], device=self.device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return bool(flag.item())

    def _validate(self) -> tuple[float, float]:
        """Full validation pass; returns (seconds, accuracy)."""
        self.model.eval()
        self._sync()
        t0 = time.perf_counter()
        correct = torch.zeros((), device=self.device)
        total = torch.zeros((), device=self.device)
        with torch.no_grad():
            for i, (x, y) in enumerate(self.eval_data):
                if self.cfg.max_eval_batches is not None and i >= self.cfg.max_eval_batches:
                    break
                out = self._forward(x)
                correct += (out.argmax(1) == y).sum()
                total += y.numel()
        if self.rank.world_size > 1:
            dist.all_reduce(correct)
            dist.all_reduce(total)
        acc = (correct / total.clamp(min=1)).item()  # synchronises
        return time.perf_counter() - t0, acc

    def _time_validation_batches(self, n: int) -> list[float]:
        """Per-batch validation times (synchronised: training is over, nothing left to perturb)."""
        self.model.eval()
        times: list[float] = []
        with torch.no_grad():
            for i, (x, _y) in enumerate(self.eval_data):
                if i >= n:
                    break
                self._sync()
                t0 = time.perf_counter()
                self._forward(x)
                self._sync()
                times.append(time.perf_counter() - t0)
        return times

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def _first_call_excess(self, fn: Any) -> float:
        """How much longer the first call of ``fn`` takes than the second (synchronised), >= 0."""
        times = []
        for _ in range(2):
            self._sync()
            t0 = time.perf_counter()
            fn()
            self._sync()
            times.append(time.perf_counter() - t0)
        return max(times[0] - times[1], 0.0)

    def _new_shape_warmup(self, steps_per_epoch: int, eval_batches: int) -> dict[str, float]:
        """One-off cost of the epoch's partial last batches, which a full run meets in its first epoch.

        A full run's last training batch and last validation batch are usually partial: a new input
        shape, whose first pass costs the GPU extra work (cuDNN autotuning: seconds for ResNet-50).
        Early-stop mode never reaches them while watching, so it runs each shape twice and counts the
        difference. Runs after the watched steps: the model's state no longer matters.
        """
        out: dict[str, float] = {}
        train = self.train_data.partial_batch() if steps_per_epoch == len(self.train_data) else None
        if train is not None:
            self.model.train()
            out["train_partial_batch_s"] = self._first_call_excess(lambda: self._step(*train))
        val = self.eval_data.partial_batch() if eval_batches >= len(self.eval_data) else None
        if val is not None:
            self.model.eval()
            with torch.no_grad():
                out["validation_partial_batch_s"] = self._first_call_excess(lambda: self._forward(val[0]))
        return out

    def _epoch_begin(self, k: int) -> None:
        self.epoch = k
        self.writer.epoch_start(k, epochs=self.cfg.epochs)

    def full(self) -> float:
        """Every epoch (or until the target accuracy), then the model saved; returns the fit time."""
        fit0 = time.perf_counter()
        for k in range(1, self.cfg.epochs + 1):
            self._epoch_begin(k)
            t0 = time.perf_counter()
            self._train_steps(self.cfg.max_steps_per_epoch, stop_check=False)
            self.clock.drain()
            self.writer.eval_start(k)
            val_s, acc = self._validate()
            self.writer.eval_stop(k)
            self.writer.metric(mllog.EVAL_ACCURACY, acc, k)
            self.writer.epoch_end(k, validation_s=val_s, epoch_s=time.perf_counter() - t0)
            target = self.cfg.target_accuracy
            if target is not None and acc >= target:  # MLPerf's time-to-train: the run ends at the target
                self.writer.target_reached(k, target, acc)
                break
        fit_s = time.perf_counter() - fit0
        if self.primary:
            # the trained model, as the seeds saved theirs (SageMaker uploads <base>/model as model.tar.gz)
            t0 = time.perf_counter()
            self.paths.model.mkdir(parents=True, exist_ok=True)
            path = self.paths.model / f"{self.cell.run_name}.pt"
            torch.save(self.net.state_dict(), path)
            self.writer.model_saved(path, time.perf_counter() - t0)
        return fit_s

    def early_stop(self) -> dict[str, Any]:
        cfg = self.cfg
        steps_per_epoch = len(self.train_data)
        if cfg.max_steps_per_epoch:
            steps_per_epoch = min(steps_per_epoch, cfg.max_steps_per_epoch)
        self.monitor = SteadyState(cfg.rule, steps_per_epoch=steps_per_epoch)
        stopped = False
        k = 0
        while not stopped and k < cfg.epochs:
            k += 1
            self._epoch_begin(k)
            stopped = self._train_steps(cfg.max_steps_per_epoch, stop_check=True)
            self.clock.drain()
            if not stopped:
                self.monitor.epoch_boundary()
        reason = self.monitor.stop_reason() or "epochs"
        est = self.monitor.estimate()
        if est is None:
            raise JobConfigError(
                f"early-stop watched {self.monitor.steps} steps, too few to estimate the step time; "
                f"raise {cfg.epochs=} or the step caps"
            )
        eval_steps = len(self.eval_data)
        if cfg.max_eval_batches:
            eval_steps = min(eval_steps, cfg.max_eval_batches)
        shapes = self._new_shape_warmup(steps_per_epoch, eval_steps)
        self.writer.eval_start(k)
        val_times = self._time_validation_batches(cfg.rule.validation_batches)
        self.writer.eval_stop(k)
        val_est = steady_estimate(val_times, confidence=cfg.rule.confidence, skip_first=1)
        train_batches = min(self.train_data.full_batch_equivalents, float(steps_per_epoch))
        eval_batches = min(self.eval_data.full_batch_equivalents, float(eval_steps))
        # one-off costs: warm-up steps and steps next to the epoch boundary, the first validation
        # batch, and the first pass of the partial last batches' shapes
        excess = est.warmup_excess_s + sum(shapes.values())
        if val_est is not None and eval_batches > 0:
            excess += val_est.warmup_excess_s
        pred = predict_run(
            est,
            steps_per_epoch=steps_per_epoch,
            train_batches=train_batches,
            epochs=cfg.epochs,
            rule=cfg.rule,
            validation=val_est,
            validation_batches_per_epoch=eval_batches,
            warmup_excess_s=excess,
            steps_watched=self.monitor.steps,
            stop_reason=reason,
            family=container_family(torch.cuda.device_count() if self.device.type == "cuda" else 0),
        )
        value = {"run_name": self.cell.run_name, "batch_size": self.cell.batch_size, **pred.to_dict()}
        value["validation_batch_times_s"] = val_times
        value["new_shape_warmup_s"] = shapes
        self.writer.prediction(value, pred, file=self.paths.prediction_file(self.cell.run_name))
        return value

    def run(self) -> dict[str, Any] | None:
        init_s = self.setup()
        self.writer.run_start(self.facts(), init_s=init_s)
        if self.primary:
            self.writer.header(mllog.FLOPS, self.flops)
        t0 = time.perf_counter()
        prediction: dict[str, Any] | None = None
        fit_s = None
        if self.cfg.mode == "early-stop":
            prediction = self.early_stop()
        else:
            fit_s = self.full()
        total = time.perf_counter() - t0
        self.writer.run_end(fit_s=fit_s, gpu_memory=gpu_memory(self.device), total_s=total)
        return prediction


def _limit_address_space(extra_mb: int) -> None:
    """Cap this process's address space at its current size plus ``extra_mb`` (test knob)."""
    pages = int(Path("/proc/self/statm").read_text().split()[0])
    current = pages * os.sysconf("SC_PAGE_SIZE")
    limit = current + extra_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _write_status(paths: Paths, cell: Cell, status: str, reason: str | None, prediction: Any = None) -> None:
    p = contract.cell_status_path(paths.output, cell.run_name)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(
        json.dumps(
            {
                "run_name": cell.run_name,
                "batch_size": cell.batch_size,
                "status": status,
                "reason": reason,
                "prediction": prediction,
            }
        )
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="trainsweep.training.worker")
    ap.add_argument("--config", required=True, type=Path)
    ap.add_argument("--cell", required=True, type=int)
    args = ap.parse_args(argv)
    cfg = JobConfig.from_json(args.config.read_text())
    paths = Paths.from_env()
    cell = cfg.cells[args.cell]
    rank = Rank.from_env()
    signal.signal(signal.SIGTERM, _on_sigterm)
    log = RunLog(paths.log_file(cell.run_name), rank=rank.rank)
    status, reason, kind, code, prediction = "ok", None, None, EXIT_OK, None
    try:
        if rank.world_size > 1:
            backend = "nccl" if torch.cuda.is_available() else "gloo"
            dist.init_process_group(backend)
        prediction = CellRun(cfg, cell, paths, rank, log).run()
    except StoppedError as e:
        status, reason, kind, code = "stopped", str(e), "stopped", EXIT_STOPPED
    except PrecisionInfeasibleError as e:  # this device cannot train in the cell's precision
        status, reason, kind, code = contract.INFEASIBLE, str(e), contract.INFEASIBLE, EXIT_BAD_INPUT
    except JobConfigError as e:
        status, reason, kind, code = "error", str(e), "error", EXIT_BAD_INPUT
    except BaseException as e:
        if contract.is_oom(e):
            status, kind, code = "oom", "oom", EXIT_OOM
            reason = contract.oom_reason(cell.batch_size, e)
        else:
            status, kind, code = "error", "error", EXIT_ERROR
            reason = f"{type(e).__name__}: {str(e).splitlines()[0][:500] if str(e) else ''}"
            traceback.print_exc()
    if kind is not None:
        assert reason is not None
        RunWriter(log, rank=rank.rank).failure(reason, kind)
        print(f"trainsweep worker: {reason}", file=sys.stderr, flush=True)
    if rank.rank == 0:
        _write_status(paths, cell, status, reason, prediction)
    log.close()
    if rank.world_size > 1 and dist.is_initialized() and code == EXIT_OK:
        # Every rank arrives before any tears down: a rank whose peer closed its connections while it
        # still had work in flight can die in the communication library (seen once with gloo under load).
        dist.barrier()
        dist.destroy_process_group()
    return code


if __name__ == "__main__":
    sys.exit(main())
