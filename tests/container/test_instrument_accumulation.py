"""Gradient accumulation seen by the hooks: several batches to one ``optimizer.step()``. The log records
how many batches a step trains, and the run's throughput counts every one of them."""

from __future__ import annotations

from collections.abc import Iterable

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from trainsweep.cost.runs import run_metrics
from trainsweep.logs import mllog

from .conftest import finish

BATCH = 4


def _train(accumulate: int, *, backwards: int = 1, batches: int = 24, epochs: int = 1) -> None:
    """A loop as gradient-accumulation scripts write it: the loss divided, a step every ``accumulate``
    batches; ``backwards`` backward passes on each batch (two losses, as a GAN's or SAM's step has)."""
    torch.manual_seed(0)
    n = batches * BATCH
    data = DataLoader(TensorDataset(torch.randn(n, 8), torch.randint(0, 2, (n,))), batch_size=BATCH)
    net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for _ in range(epochs):
        for i, (x, y) in enumerate(data):
            for _ in range(backwards):
                (nn.functional.cross_entropy(net(x), y) / accumulate).backward()
            if (i + 1) % accumulate == 0:
                opt.step()
                opt.zero_grad()


def _batches(count: int, with_loader: bool) -> Iterable[tuple[torch.Tensor, torch.Tensor]]:
    """``count`` batches of BATCH samples: from a DataLoader, or (a loop without one) sliced by hand."""
    x, y = torch.randn(count * BATCH, 8), torch.randint(0, 2, (count * BATCH,))
    if with_loader:
        return DataLoader(TensorDataset(x, y), batch_size=BATCH)
    return zip(x.split(BATCH), y.split(BATCH), strict=True)


def _step_every_second_batch(net: nn.Module, opt: torch.optim.Optimizer, batches: int = 24) -> None:
    """Two batches accumulated a step, without a loader."""
    for i in range(batches):
        nn.functional.cross_entropy(net(torch.randn(BATCH, 8)), torch.randint(0, 2, (BATCH,))).backward()
        if i % 2:
            opt.step()
            opt.zero_grad()


@pytest.mark.parametrize(("accumulate", "backwards"), [(1, 1), (4, 1), (1, 2)])
def test_the_batches_a_step_trains_are_recorded_and_counted_in_samples_per_s(recorder, accumulate, backwards):
    session = recorder(epochs=1, batch_size=BATCH)
    _train(accumulate, backwards=backwards)
    run = finish(session)
    assert run.extra[mllog.BATCHES_PER_STEP] == accumulate  # two backward passes on one batch train one
    assert 0 <= run.extra[mllog.CPU_WAIT]["wait_share"] < 1  # read from this process's threads
    assert len(run.epochs[0].step_s) == 24 // accumulate
    m = run_metrics(run)
    assert m.batches_per_step == (accumulate if accumulate > 1 else None)
    assert m.samples_per_s == pytest.approx(accumulate * BATCH / m.step_s)


@pytest.mark.parametrize("with_loader", [False, True])
def test_backward_passes_inside_a_closure_step_are_that_steps_batch_not_accumulation(recorder, with_loader):
    """LBFGS evaluates its closure (forward and backward on the step's batch) up to ``max_iter`` times in
    one ``optimizer.step(closure)``: each step trains one batch, not five."""
    session = recorder(epochs=1, batch_size=BATCH)
    torch.manual_seed(0)
    batches = _batches(12, with_loader)
    net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    opt = torch.optim.LBFGS(net.parameters(), lr=0.5, max_iter=5)
    for xb, yb in batches:

        def closure(xb: torch.Tensor = xb, yb: torch.Tensor = yb) -> torch.Tensor:
            opt.zero_grad()
            loss = nn.functional.cross_entropy(net(xb), yb)
            loss.backward()
            return loss

        opt.step(closure)
    run = finish(session)
    assert len(run.epochs[0].step_s) == 12
    assert run.extra.get(mllog.BATCHES_PER_STEP, 1.0) == 1.0
    m = run_metrics(run)
    assert m.batches_per_step is None
    assert m.samples_per_s == pytest.approx(BATCH / m.step_s)


def test_a_gan_without_a_loader_trains_one_batch_a_step_though_it_runs_two_backward_passes(recorder):
    """The discriminator and the generator each step after their own backward pass: no accumulation."""
    session = recorder(epochs=1, batch_size=16)
    torch.manual_seed(0)
    gen = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
    disc = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 1))
    opt_g, opt_d = torch.optim.Adam(gen.parameters()), torch.optim.Adam(disc.parameters())
    bce = nn.BCEWithLogitsLoss()
    for _ in range(12):
        real, fake = torch.randn(16, 2) + 1, gen(torch.randn(16, 4))
        opt_d.zero_grad()
        (bce(disc(real), torch.ones(16, 1)) + bce(disc(fake.detach()), torch.zeros(16, 1))).backward()
        opt_d.step()
        opt_g.zero_grad()
        bce(disc(fake), torch.ones(16, 1)).backward()
        opt_g.step()
    run = finish(session)
    assert len(run.epochs[0].step_s) == 12  # the first optimizer's steps
    assert run.extra.get(mllog.BATCHES_PER_STEP, 1.0) == 1.0


def test_an_optimizer_wrapping_another_is_one_step_with_the_batches_accumulated_before_it(recorder):
    class Wrapper(torch.optim.Optimizer):  # Lookahead-style: its step runs the inner optimizer's
        def __init__(self, inner: torch.optim.Optimizer) -> None:
            self.inner = inner
            super().__init__(inner.param_groups[0]["params"], {})

        def step(self, closure=None):
            return self.inner.step(closure)

    session = recorder(epochs=1, batch_size=BATCH)
    torch.manual_seed(0)
    net = nn.Linear(8, 2)
    opt = Wrapper(torch.optim.SGD(net.parameters(), lr=0.1))
    _step_every_second_batch(net, opt)
    run = finish(session)
    assert run.extra[mllog.BATCHES_PER_STEP] == 2


def test_a_step_that_raised_and_was_caught_leaves_no_step_under_way(recorder):
    session = recorder(epochs=1, batch_size=BATCH)
    torch.manual_seed(0)
    net = nn.Linear(8, 2)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)

    def refused() -> torch.Tensor:
        raise FloatingPointError("a closure that gives up")

    with pytest.raises(FloatingPointError):
        opt.step(refused)  # its post-hook never runs
    _step_every_second_batch(net, opt)
    run = finish(session)
    assert run.extra[mllog.BATCHES_PER_STEP] == 2


@pytest.mark.parametrize("with_loader", [True, False])
def test_steps_amps_grad_scaler_skipped_at_the_start_are_not_gradient_accumulation(recorder, with_loader):
    """``GradScaler.step`` skips ``optimizer.step()`` while the scaled float16 gradients overflow, as
    they do for the first few steps of many runs: the batches of a skipped step go to the next one."""
    session = recorder(epochs=1, batch_size=BATCH)
    torch.manual_seed(0)
    batches = _batches(30, with_loader)
    net = nn.Linear(8, 2)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu")
    for i, (xb, yb) in enumerate(batches):
        loss = nn.functional.cross_entropy(net(xb), yb)
        scaler.scale(loss * float("inf") if i < 3 else loss).backward()  # the first three overflow
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
    assert scaler.get_scale() == 65536.0 / 8  # three skips, each halving the scale
    run = finish(session)
    assert len(run.epochs[0].step_s) == 27
    assert run.extra.get(mllog.BATCHES_PER_STEP, 1.0) == 1.0
    assert run_metrics(run).batches_per_step is None


def test_early_stops_prediction_says_how_many_batches_a_step_trains_and_the_search_counts_them(recorder):
    from trainsweep.instrument.session import EarlyStop
    from trainsweep.training.supervisor import BatchSizeSearch, CellResult

    rule = {"min_steady_steps": 5, "min_seconds": 0, "precision": 0.9, "max_steps": 30}
    session = recorder(mode="early-stop", rule=rule, epochs=3, batch_size=BATCH)
    with pytest.raises(EarlyStop):
        _train(4, batches=40, epochs=3)
    pred = session.prediction
    assert pred is not None and pred["batches_per_step"] == 4 and pred["steps_per_epoch"] == 10
    search = BatchSizeSearch(0.03)
    search.add(CellResult("cell", BATCH, "ok", None, 0, pred))
    assert search.record()["curve"] == [
        {"batch_size": BATCH, "samples_per_s": pytest.approx(4 * BATCH / pred["step_s"])}
    ]
