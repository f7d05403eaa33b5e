"""The step clock's bookkeeping. The CUDA path cannot run here (no GPU): a stand-in for CUDA events with
a scripted device timeline checks that steps resolve lazily, in order, without waiting, and all at the
epoch's end; the CPU path runs for real."""

from __future__ import annotations

import time

import pytest
import torch

from trainsweep.training.timing import StepClock


class Device:
    """A scripted GPU: work is queued at record() and completes when ``now`` passes it."""

    def __init__(self) -> None:
        self.now = 0.0  # how far the device has got (ms)
        self.queued = 0.0  # device time at which the last queued work ends (ms)
        self.synchronized = 0

    def enqueue(self, ms: float) -> None:
        self.queued = max(self.queued, self.now) + ms


DEVICE = Device()


class FakeEvent:
    created = 0

    def __init__(self, enable_timing: bool = False) -> None:
        assert enable_timing
        FakeEvent.created += 1
        self.at: float | None = None

    def record(self) -> None:
        self.at = DEVICE.queued

    def query(self) -> bool:
        return self.at is not None and self.at <= DEVICE.now

    def elapsed_time(self, end: FakeEvent) -> float:
        assert self.query() and end.query(), "elapsed_time on an unfinished event"
        return end.at - self.at


class Stream:
    def synchronize(self) -> None:
        DEVICE.synchronized += 1
        DEVICE.now = DEVICE.queued


@pytest.fixture
def fake_cuda(monkeypatch):
    global DEVICE
    DEVICE = Device()
    FakeEvent.created = 0
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: Stream())
    return DEVICE


def run_epoch(
    clock: StepClock, device: Device, waits: list[float], computes: list[float], lag: float
) -> None:
    clock.epoch_start()
    for wait, comp in zip(waits, computes, strict=True):
        device.enqueue(wait)  # the device idles, waiting for this step's input
        clock.data_ready()
        device.enqueue(comp)
        clock.step_end()
        device.now = max(0.0, device.queued - lag)  # the CPU runs ahead of the device by `lag` ms


def test_cuda_steps_resolve_in_order_without_waiting_and_all_at_the_epoch_end(fake_cuda):
    seen: list[tuple[int, float, float, float]] = []
    clock = StepClock(torch.device("cuda", 0), lambda *a: seen.append(a))
    waits, computes = [5.0, 0.0, 1.0, 0.0, 2.0, 0.0], [100.0, 50.0, 50.0, 50.0, 50.0, 60.0]
    run_epoch(clock, fake_cuda, waits, computes, lag=120.0)
    assert fake_cuda.synchronized == 0
    assert 0 < len(seen) < 6  # some steps resolved while training, the latest still pending
    assert clock.pending == 6 - len(seen)
    clock.drain()
    assert fake_cuda.synchronized == 1
    assert [s[0] for s in seen] == [1, 2, 3, 4, 5, 6]
    for (_, step, wait, comp), w, c in zip(seen, waits, computes, strict=True):
        assert comp == pytest.approx(c / 1000)
        assert wait == pytest.approx(w / 1000)
        assert step == pytest.approx((w + c) / 1000)


def test_cuda_events_are_reused_across_epochs(fake_cuda):
    clock = StepClock(torch.device("cuda", 0), lambda *a: None)
    for _ in range(5):
        run_epoch(clock, fake_cuda, [0.0] * 50, [10.0] * 50, lag=15.0)
        clock.drain()
    assert FakeEvent.created < 20  # a small pool, not two events per step


def test_cpu_steps_are_reported_at_once_with_wait_plus_compute_equal_to_step():
    seen = []
    clock = StepClock(torch.device("cpu"), lambda *a: seen.append(a))
    clock.epoch_start()
    for _ in range(3):
        time.sleep(0.01)
        clock.data_ready()
        time.sleep(0.02)
        clock.step_end()
        assert len(seen) == clock._step
    for _, step, wait, comp in seen:
        assert wait >= 0.009 and comp >= 0.019
        assert wait + comp == pytest.approx(step)


def test_partial_batch_has_the_shape_of_the_epochs_last_batch():
    from trainsweep.training.data import DATASETS, Batches, SyntheticBatches

    info = DATASETS["resnet50-cifar10"]
    syn = SyntheticBatches(info, batch_size=16, train=True, device=torch.device("cpu"), seed=0,
                           train_samples=100)  # fmt: skip
    last = list(syn)[-1]
    part = syn.partial_batch()
    assert part is not None
    assert part[0].shape == last[0].shape == (4, 3, 32, 32) and part[1].shape == (4,)
    x = torch.zeros((64, 3, 32, 32), dtype=torch.uint8)
    y = torch.zeros(64, dtype=torch.int64)
    full = Batches(x, y, batch_size=16, info=info, train=True, seed=0)
    assert full.partial_batch() is None  # 64 = 4 full batches
    odd = Batches(x[:49], y[:49], batch_size=16, info=info, train=True, seed=0)
    assert odd.partial_batch() is None  # a last batch of one is dropped in training: all are full
    ev = Batches(x[:49], y[:49], batch_size=16, info=info, train=False, seed=0)
    part = ev.partial_batch()
    assert part is not None and part[0].shape == (1, 3, 32, 32) and part[0].dtype == torch.float32
