"""The automatic hooks on plain PyTorch loops, in this process: what the run log says about epochs, steps,
data waits and validation, read back with the log parser."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
from torch import nn
from torch.utils.data import BatchSampler, DataLoader, Dataset, SequentialSampler, TensorDataset

from trainsweep.instrument import auto
from trainsweep.instrument.session import Session, open_session
from trainsweep.logs.model import RunTimings
from trainsweep.training.contract import InstrumentConfig

from .conftest import finish

Recorder = Callable[..., Session]


def loader(n: int = 16, batch_size: int = 4, **kw: Any) -> DataLoader:
    return DataLoader(
        TensorDataset(torch.randn(n, 3), torch.randint(0, 2, (n,))), batch_size=batch_size, **kw
    )


class Model:
    """A linear classifier with its optimizer."""

    def __init__(self) -> None:
        torch.manual_seed(0)
        self.net = nn.Linear(3, 2)
        self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)

    def step(self, x: torch.Tensor, y: torch.Tensor, *, update: bool = True) -> None:
        nn.functional.cross_entropy(self.net(x), y).backward()
        if update:
            self.opt.step()
            self.opt.zero_grad()

    def evaluate(self, data: DataLoader) -> None:
        with torch.no_grad():
            for x, _y in data:
                self.net(x)


def steps_per_epoch(run: RunTimings) -> list[int]:
    return [e.steps for e in run.epochs]


def test_each_training_pass_is_an_epoch_with_one_step_per_optimizer_step(recorder):
    session = recorder()
    m, train, val = Model(), loader(16), loader(8)
    for _ in range(2):
        for x, y in train:
            m.step(x, y)
        m.evaluate(val)
    run = finish(session)
    assert run.status == "complete", run.problems
    assert steps_per_epoch(run) == [4, 4]
    assert [list(e.step_numbers) for e in run.epochs] == [[1, 2, 3, 4], [1, 2, 3, 4]]
    assert run.header.batch_size == 4 and run.header.train_samples == 16 and run.header.eval_samples == 8
    assert run.header.workload == "train.py" and run.header.epochs == 2


def test_the_evaluation_pass_after_training_is_the_epochs_validation_and_inside_its_time(recorder):
    session = recorder()
    m, train, val = Model(), loader(16), loader(8)
    for _ in range(2):
        for x, y in train:
            m.step(x, y)
        with torch.no_grad():
            for _x, _y in val:
                time.sleep(0.02)
    run = finish(session)
    for e in run.epochs:
        assert e.validation_s is not None and e.validation_s >= 2 * 0.02
        assert e.epoch_s is not None and e.epoch_s >= sum(e.step_s) + e.validation_s


def test_the_time_in_the_loaders_next_is_the_steps_data_wait(recorder):
    class Slow(Dataset):
        def __len__(self) -> int:
            return 12

        def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
            time.sleep(0.005)
            return torch.randn(3), torch.tensor(i % 2)

    session = recorder(epochs=1)
    m = Model()
    for x, y in DataLoader(Slow(), batch_size=4):
        m.step(x, y)
    run = finish(session)
    (epoch,) = run.epochs
    assert epoch.data_wait_s is not None and epoch.compute_s is not None
    for wait, compute, step in zip(epoch.data_wait_s, epoch.compute_s, epoch.step_s, strict=True):
        assert wait >= 4 * 0.005
        assert wait + compute == pytest.approx(step)


def test_without_evaluation_an_epoch_ends_when_the_next_training_pass_starts(recorder):
    session = recorder(epochs=3)
    m, train = Model(), loader(8)
    for _ in range(3):
        for x, y in train:
            m.step(x, y)
    run = finish(session)
    assert steps_per_epoch(run) == [2, 2, 2]
    assert all(e.epoch_s is not None and e.validation_s is None for e in run.epochs)
    assert run.fit_s is not None and run.total_s is not None


def test_an_evaluation_inside_a_training_pass_counts_as_validation_but_does_not_end_the_epoch(recorder):
    session = recorder()
    m, train, val = Model(), loader(16), loader(8)
    for _ in range(2):
        for i, (x, y) in enumerate(train):
            m.step(x, y)
            if i == 1:
                m.evaluate(val)
    run = finish(session)
    assert steps_per_epoch(run) == [4, 4]
    assert all(e.validation_s is not None for e in run.epochs)


def test_a_loop_that_breaks_out_of_its_loader_still_gives_one_epoch_per_pass(recorder):
    session = recorder()
    m, train = Model(), loader(40)
    for _ in range(2):
        for i, (x, y) in enumerate(train):
            m.step(x, y)
            if i == 2:
                break
    run = finish(session)
    assert steps_per_epoch(run) == [3, 3]


def test_with_gradient_accumulation_a_step_is_an_optimizer_update_not_a_batch(recorder):
    session = recorder()
    m, train = Model(), loader(32)
    for _ in range(2):
        for i, (x, y) in enumerate(train):
            m.step(x, y, update=i % 2 == 1)
    run = finish(session)
    assert steps_per_epoch(run) == [4, 4]


def test_a_second_optimizer_stepping_in_the_same_iteration_is_not_a_second_step(recorder):
    session = recorder(epochs=1)
    m, other = Model(), nn.Linear(3, 1)
    opt2 = torch.optim.SGD(other.parameters(), lr=0.1)
    for x, y in loader(16):
        m.step(x, y)
        other(x).sum().backward()
        opt2.step()
    run = finish(session)
    assert steps_per_epoch(run) == [4]


def test_a_consumer_that_reads_one_batch_ahead_keeps_the_last_step_in_its_epoch(recorder):
    def ahead(data: DataLoader) -> Iterator[Any]:
        """As accelerate's and Lightning's fetchers: the loader ends before the last batch is used."""
        it = iter(data)
        current = next(it)
        for following in it:
            yield current
            current = following
        yield current

    session = recorder()
    m, train, val = Model(), loader(16), loader(8)
    for _ in range(2):
        for x, y in ahead(train):
            m.step(x, y)
        m.evaluate(val)
    run = finish(session)
    assert steps_per_epoch(run) == [4, 4]
    assert all(e.validation_s is not None for e in run.epochs)


def test_an_evaluation_before_training_is_not_an_epochs_validation(recorder):
    session = recorder(epochs=1)
    m, train, val = Model(), loader(8), loader(8)
    m.evaluate(val)  # e.g. Lightning's sanity check
    for x, y in train:
        m.step(x, y)
    run = finish(session)
    assert steps_per_epoch(run) == [2]
    assert run.epochs[0].validation_s is None


def test_max_steps_per_epoch_ends_each_training_pass_after_that_many_batches(recorder):
    session = recorder(max_steps_per_epoch=3)
    m, train = Model(), loader(40)
    seen = []
    for _ in range(2):
        n = 0
        for x, y in train:
            m.step(x, y)
            n += 1
        seen.append(n)
    run = finish(session)
    assert seen == [3, 3]
    assert steps_per_epoch(run) == [3, 3]
    assert run.header.train_samples == 12  # the capped epoch: the parser's steps-per-epoch check holds
    assert run.status == "complete", run.problems


def test_max_eval_batches_ends_a_pass_without_optimizer_steps_after_that_many_batches(recorder):
    session = recorder(epochs=1, max_eval_batches=2)
    m, train, val = Model(), loader(8), loader(40)
    for x, y in train:
        m.step(x, y)
    with torch.no_grad():
        evaluated = sum(1 for _ in val)
    run = finish(session)
    assert evaluated == 2
    assert run.header.eval_samples == 8


def test_a_loader_without_batch_size_is_measured_by_its_first_batch(recorder):
    session = recorder(epochs=1, batch_size=8)
    data = TensorDataset(torch.randn(12, 3), torch.randint(0, 2, (12,)))
    sampler = BatchSampler(SequentialSampler(data), batch_size=6, drop_last=False)
    m = Model()
    for x, y in DataLoader(data, batch_sampler=sampler):
        m.step(x, y)
    run = finish(session)
    assert session.loader_batch_size == 6
    assert session.flags == ["the script ignored --batch-size 8: its training loader batches 6 per rank"]
    assert run.header.batch_size == 6  # the batch the script trained with, not the one asked for


def test_the_batch_size_asked_for_is_split_over_the_ranks(recorder, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    session = recorder(epochs=1, batch_size=8)
    m = Model()
    for x, y in loader(8, batch_size=4):
        m.step(x, y)
    run = finish(session)
    assert session.flags == []
    assert run.header.batch_size == 8 and run.header.world_size == 2


def test_early_stop_ends_the_loop_from_optimizer_step_with_a_prediction_of_the_full_run(recorder, tmp_path):
    from trainsweep.instrument.session import EarlyStop

    rule = {"min_steady_steps": 5, "min_seconds": 0, "precision": 0.9, "max_steps": 40}
    session = recorder(mode="early-stop", rule=rule, epochs=3)
    net = nn.Linear(3, 2)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    train = DataLoader(TensorDataset(torch.randn(400, 3), torch.randint(0, 2, (400,))), batch_size=4)
    # built but never iterated before the stop: early stop times its batches all the same
    _val = DataLoader(TensorDataset(torch.randn(40, 3), torch.randint(0, 2, (40,))), batch_size=8)
    steps = 0
    with pytest.raises(EarlyStop) as stop:
        for _ in range(3):
            for x, y in train:
                nn.functional.cross_entropy(net(x), y).backward()
                opt.step()
                opt.zero_grad()
                steps += 1
    pred = stop.value.prediction
    assert pred is not None and steps < 100
    assert pred["steps_per_epoch"] == 100 and pred["epochs"] == 3
    assert pred["validation_batches_per_epoch"] == 5 and len(pred["validation_batch_times_s"]) == 6
    assert json.loads((tmp_path / "prediction.json").read_text()) == pred
    run = finish(session)
    assert run.prediction == pred


EARLY = {"min_steady_steps": 5, "min_seconds": 0, "precision": 0.9, "max_steps": 40}


def train_until_stopped(net: nn.Module, train: DataLoader, epochs: int = 3) -> int:
    """Train ``net`` until early stop ends the loop; returns the steps it took."""
    from trainsweep.instrument.session import EarlyStop

    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    loss = nn.CrossEntropyLoss()  # a module too, called outside the model: not the model
    steps = 0
    with pytest.raises(EarlyStop):
        for _ in range(epochs):
            for x, y in train:
                loss(net(x), y).backward()
                opt.step()
                opt.zero_grad()
                steps += 1
    return steps


def test_early_stop_without_an_evaluation_loader_predicts_training_alone(recorder):
    session = recorder(mode="early-stop", rule=EARLY)
    train_until_stopped(nn.Linear(3, 2), loader(400))
    pred = session.prediction
    assert pred is not None
    assert pred["validation_batches_per_epoch"] == 0 and pred["validation_s"] == 0
    assert session.flags == []


def test_early_stop_flags_evaluation_batches_the_model_cannot_take_and_predicts_without_them(recorder):
    class Named(Dataset):
        def __len__(self) -> int:
            return 16

        def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
            return {"pixels": torch.randn(3)}  # the model takes no keyword "pixels"

    session = recorder(mode="early-stop", rule=EARLY)
    _val = DataLoader(Named(), batch_size=8)
    train_until_stopped(nn.Linear(3, 2), loader(400))
    pred = session.prediction
    assert pred is not None and pred["validation_batch_times_s"] == []
    assert "validation not timed: the epoch time leaves it out" in pred["notes"]
    (flag,) = session.flags
    assert flag.startswith("early stop could not time validation batches (TypeError: ")
    assert flag.endswith("): the prediction leaves validation out")


def test_early_stop_times_validation_with_the_model_not_the_loss_module(recorder):
    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = nn.Linear(3, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.body(x)

    calls: list[int] = []
    net = Net()
    net.register_forward_pre_hook(lambda m, args: calls.append(args[0].shape[0]))
    session = recorder(mode="early-stop", rule=EARLY)
    _val = loader(40, batch_size=8)
    train_until_stopped(net, loader(400))
    pred = session.prediction
    assert pred is not None and len(pred["validation_batch_times_s"]) == 6
    assert calls[-6:] == [8] * 6  # the validation batches went through the model itself
    assert net.training  # back in training mode afterwards


def test_early_stop_that_never_fires_predicts_at_the_end_with_what_the_script_dropped(recorder):
    never = {"precision": 1e-9, "max_steps": None, "max_seconds": None, "max_epochs": None}
    session = recorder(mode="early-stop", rule=never)

    def script() -> None:  # model and loaders are the script's locals: gone when it returns
        m, train, val = Model(), loader(40), loader(16, batch_size=8)
        for _ in range(2):
            for x, y in train:
                m.step(x, y)
            m.evaluate(val)

    script()
    run = finish(session)
    pred = session.prediction
    assert pred is not None and pred["stop_reason"] == "epochs" and pred["steps_watched"] == 20
    assert pred["validation_batches_per_epoch"] == 2 and len(pred["validation_batch_times_s"]) == 6
    assert session.flags == []
    assert [e.steps for e in run.epochs] == [10, 10] and run.prediction == pred


def _train_epochs(m: Model, train: DataLoader, val: DataLoader, epochs: int, accumulate: int = 1) -> int:
    """A plain loop of ``epochs`` epochs until early stop ends it; returns the batches it began."""
    from trainsweep.instrument.session import EarlyStop

    batches = 0
    with pytest.raises(EarlyStop):
        for _ in range(epochs):
            for i, (x, y) in enumerate(train):
                batches += 1
                m.step(x, y, update=i % accumulate == accumulate - 1)
            m.evaluate(val)
    return batches


def test_early_stop_that_never_gets_precise_stops_on_the_last_step_of_its_second_epoch(recorder):
    session = recorder(mode="early-stop", rule={"precision": 1e-9, "max_steps": None}, epochs=5)
    batches = _train_epochs(Model(), loader(40), loader(16, batch_size=8), epochs=5)
    run = finish(session)
    pred = session.prediction
    assert batches == 20 and steps_per_epoch(run) == [10, 10]  # not one step of epoch 3
    assert pred is not None and pred["stop_reason"] == "max_epochs" and pred["steps_watched"] == 20
    assert pred["epochs"] == 5 and pred["steps_per_epoch"] == 10


def test_the_epoch_cap_counts_optimizer_steps_of_the_first_epoch_under_gradient_accumulation(recorder):
    # 10 batches a pass, an update every 2: until epoch 1 ends the cap guesses 10 steps an epoch (one per
    # batch), then counts the 5 steps the first epoch had: the stop comes at the end of epoch 2, not 4
    rule = {"precision": 1e-9, "max_steps": None, "max_epochs": 2}
    session = recorder(mode="early-stop", rule=rule, epochs=5)
    batches = _train_epochs(Model(), loader(40), loader(16, batch_size=8), epochs=5, accumulate=2)
    run = finish(session)
    assert batches == 20 and steps_per_epoch(run) == [5, 5]
    assert session.prediction is not None and session.prediction["stop_reason"] == "max_epochs"


class FakeEvent:
    """A CUDA event on a scripted device clock (tests/container/test_timing.py has the full model)."""

    now = 0.0
    created = 0

    def __init__(self, enable_timing: bool = False) -> None:
        FakeEvent.created += 1
        self.at = 0.0

    def record(self) -> None:
        self.at = FakeEvent.now

    def query(self) -> bool:
        return True

    def elapsed_time(self, end: FakeEvent) -> float:
        return (end.at - self.at) * 1000


def test_on_cuda_marking_data_ready_again_recycles_its_event_and_the_last_mark_counts(monkeypatch):
    from trainsweep.training.timing import StepClock

    class Stream:
        def synchronize(self) -> None:
            pass

    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: Stream())
    FakeEvent.now, FakeEvent.created = 0.0, 0
    seen: list[tuple[float, float]] = []
    clock = StepClock(torch.device("cuda", 0), lambda n, step, wait, compute: seen.append((wait, compute)))
    clock.epoch_start()
    clock.data_ready()  # armed: a step nobody marks counts as compute
    for _ in range(100):
        FakeEvent.now += 0.25  # waiting for the batch
        clock.data_ready()  # the loader's mark replaces the armed one
        FakeEvent.now += 0.75
        clock.step_end()
        clock.data_ready()
    clock.drain()
    assert seen == [(0.25, 0.75)] * 100
    assert FakeEvent.created <= 8


def test_removing_the_hooks_restores_pytorch(tmp_path):
    init, it = DataLoader.__init__, DataLoader.__iter__
    cfg = InstrumentConfig(
        "c", 4, 1, str(tmp_path / "l.log"), str(tmp_path / "s.json"), str(tmp_path / "p.json")
    )
    session = open_session(cfg, workload="t.py", rank=0)
    auto.install(session).remove()
    session.close()
    assert (DataLoader.__init__, DataLoader.__iter__) == (init, it)
    m = Model()
    for x, y in loader(8):
        m.step(x, y)
    assert session.steps == 0


class Stream(torch.utils.data.IterableDataset):
    """Samples made on the fly, as a streaming dataset yields them: no ``__len__``."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __iter__(self):
        g = torch.Generator().manual_seed(0)
        for _ in range(self.n):
            x = torch.randn(3, generator=g)
            yield x, int(x.sum() > 0)


def test_early_stop_on_a_loader_without_a_length_predicts_from_its_first_whole_pass(recorder):
    """The steps of an epoch are known when the first pass over the loader ends: early stop watches it
    whole, then predicts (before, it failed: "steps per epoch are unknown")."""
    session = recorder(mode="early-stop", rule=EARLY, epochs=3)
    steps = train_until_stopped(nn.Linear(3, 2), DataLoader(Stream(100), batch_size=4))
    pred = session.prediction
    assert pred is not None and pred["steps_per_epoch"] == 25 and pred["epochs"] == 3
    assert 25 <= steps < 75
