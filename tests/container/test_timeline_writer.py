"""The one writer of a run's timeline: what it writes is a run the parser reads as complete, and a run cut
before its end is missing the events :data:`trainsweep.logs.mllog.REQUIRED_EVENTS` lists."""

from __future__ import annotations

from trainsweep.logs import mllog, parse
from trainsweep.training.runlog import RunLog
from trainsweep.training.timeline import RunFacts, RunWriter

FACTS = RunFacts(
    workload="mnist-cnn",
    global_batch_size=64,
    train_samples=128,
    eval_samples=64,
    epochs=2,
    gpus=0,
    world_size=1,
    platform="cpu",
    command_line="train.py",
    instance_type="ml.m5.large",
    mode="full",
    seed=0,
)


def _write(path, *, epochs: int, end: bool) -> None:
    with RunLog(path, echo=False) as log:
        w = RunWriter(log)
        w.init_start()
        w.run_start(FACTS, init_s=0.5)
        for k in range(1, epochs + 1):
            w.epoch_start(k, epochs=FACTS.epochs)
            for n in (1, 2):
                w.step(k, n, 0.25, 0.05, 0.2)
            w.eval_start(k)
            w.eval_stop(k)
            w.metric(mllog.EVAL_ACCURACY, 0.5, k)
            w.epoch_end(k, validation_s=0.1, epoch_s=0.6)
        if end:
            w.run_end(fit_s=1.2, gpu_memory=None, total_s=1.5)


def test_a_whole_timeline_is_a_complete_run(tmp_path) -> None:
    _write(tmp_path / "a.log", epochs=2, end=True)
    run = parse(tmp_path / "a.log")
    assert (run.status, run.problems) == ("complete", [])
    assert [e.steps for e in run.epochs] == [2, 2] and run.header.batch_size == 64


def test_a_timeline_cut_before_the_run_end_misses_run_stop(tmp_path) -> None:
    _write(tmp_path / "a.log", epochs=2, end=False)
    run = parse(tmp_path / "a.log")
    assert run.status == "partial"
    assert [p.code for p in run.problems] == ["missing-events"] and mllog.RUN_STOP in run.problems[0].message
