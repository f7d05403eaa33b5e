"""What the job asked of an instrumented script against what the script does: the run's header facts
(:class:`trainsweep.training.timeline.RunFacts`, with a flag when the script ignored the batch size it was
given) and the refusal of a GPU job whose script steps on the CPU.
"""

from __future__ import annotations

import sys

import torch

from trainsweep.instrument.outcome import EarlyStop
from trainsweep.instrument.passes import Loaders, world_size
from trainsweep.instrument.settings import Settings
from trainsweep.training.contract import job_gpus_said
from trainsweep.training.timeline import RunFacts


def run_facts(settings: Settings, loaders: Loaders, where: torch.device, flags: list[str]) -> RunFacts:
    """The header of a script's run on ``where``; appends to ``flags`` when the script ignored the batch
    size (the log then says what it trained with)."""
    s = settings
    world = world_size()
    observed = loaders.batch_size
    if observed is not None and s.batch_size is not None and observed != s.batch_size // world:
        flags.append(
            f"the script ignored --{s.batch_size_arg} {s.batch_size}: "
            f"its training loader batches {observed} per rank"
        )
    per_rank = observed or (s.batch_size // world if s.batch_size else None)
    train_n, eval_n = loaders.samples(per_rank)
    gpus = torch.cuda.device_count() if where.type == "cuda" else 0
    return RunFacts(
        workload=s.workload,
        global_batch_size=observed * world if observed is not None else s.batch_size,
        train_samples=train_n,
        eval_samples=eval_n,
        epochs=s.epochs,
        gpus=gpus,
        world_size=world,
        platform=torch.cuda.get_device_name(where) if gpus else "cpu",
        command_line=" ".join(sys.argv),
        instance_type=s.instance_type,
        mode=s.mode,
        steps=s.steps,
    )


def refuse_cpu_steps_on_a_gpu_job() -> None:
    """Before the first optimizer step is counted: a job with GPUs whose script has not touched CUDA trains
    on the CPU, and its timings would be filed under a GPU instance type (the built-in workloads refuse
    the same way).

    Raises:
        EarlyStop: with the reason, when the job has GPUs and the script has not used CUDA.
    """
    try:
        gpus = job_gpus_said() or 0
    except ValueError:
        return  # unreadable: the launcher's own checks say so; nothing to compare with here
    if gpus > 0 and not (torch.cuda.is_available() and torch.cuda.is_initialized()):
        why = "" if torch.cuda.is_available() else " (and this torch cannot see a GPU)"
        raise EarlyStop(
            None,
            f"the job has {gpus} GPU(s) (SM_NUM_GPUS={gpus}) but the script's first optimizer step ran on "
            f"the CPU{why}: its timings would be filed under a GPU instance type; move the model and its "
            "batches to the GPU (torch.device('cuda'))",
        )
