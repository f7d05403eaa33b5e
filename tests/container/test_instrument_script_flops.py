"""The FLOPs of an instrumented script's training step, counted once at the end of the run from the
forward pass the usage hooks recorded (:mod:`trainsweep.instrument.script_flops`), and read back from the
run log it wrote against hand counts."""

from __future__ import annotations

import functools
import math
import socket
from collections.abc import Iterator

import pytest
import torch
import torch.distributed as dist
from torch import nn
from torch.utils.checkpoint import checkpoint
from torch.utils.data import DataLoader, TensorDataset

from trainsweep.cost import throughput
from trainsweep.cost.runs import RunMetrics
from trainsweep.instrument import script_flops
from trainsweep.logs import mllog

from .conftest import finish

BATCH = 4


def _train(net: nn.Module, *, steps: int = 4) -> None:
    data = DataLoader(
        TensorDataset(torch.randn(BATCH * steps, 8), torch.randint(0, 2, (BATCH * steps,))), BATCH
    )
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for x, y in data:
        nn.functional.cross_entropy(net(x), y).backward()
        opt.step()
        opt.zero_grad()


def _mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))


def _mlp_hand_count(batch: int) -> int:
    """2 FLOPs per multiply-add: the forward products, then the backward's gradients of both weights and of
    the second layer's input (the batch needs no gradient, so the first layer's input gets none)."""
    forward = 2 * batch * (8 * 16 + 16 * 2)
    backward = 2 * batch * (16 * 2) + 2 * batch * (16 * 2 + 8 * 16)
    return forward + backward


def _flops(session) -> dict:
    return finish(session).extra[mllog.FLOPS]


def test_a_scripts_mlp_is_counted_once_at_the_end_as_a_hand_count_says(recorder):
    session = recorder(epochs=1)
    _train(_mlp())
    call = session.usage.forward.call
    assert all(isinstance(a, script_flops.TensorSpec) for a in call.args)  # shapes kept, not the tensors
    event = _flops(session)
    assert event["per_step"] == _mlp_hand_count(BATCH)
    assert event["per_sample"] == _mlp_hand_count(BATCH) / BATCH
    assert (event["precision"], event["device"], event["accelerators"]) == ("fp32", "cpu", 0)


class Checkpointed(nn.Module):
    """The MLP above with activation checkpointing, as memory-bound scripts use it: its forward passes are
    run again in the backward pass, which MFU does not count."""

    def __init__(self, how: str) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.first, self.second = nn.Sequential(nn.Linear(8, 16), nn.ReLU()), nn.Linear(16, 2)
        self.how = how

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.how == "reentrant":  # the input of the segment needs a gradient, as reentrant requires
            return checkpoint(self.second, self.first(x), use_reentrant=True)
        if self.how == "partial":  # Hugging Face's gradient_checkpointing_enable() binds a partial
            return self.second(functools.partial(checkpoint, use_reentrant=False)(self.first, x))
        return self.second(checkpoint(self.first, x, use_reentrant=False))


@pytest.mark.parametrize("how", ["non-reentrant", "reentrant", "partial"])
def test_an_activation_checkpointed_model_counts_its_model_flops_without_the_recomputation(recorder, how):
    session = recorder(epochs=1)
    _train(Checkpointed(how))
    event = _flops(session)
    assert "error" not in event, event
    assert event["per_step"] == _mlp_hand_count(BATCH)
    assert torch.utils.checkpoint.CheckpointFunction.__name__ == "CheckpointFunction"  # put back


def _train_views(net: nn.Module, views: int, *, steps: int = 4, dry_run: bool = False) -> None:
    """A contrastive-style loop: the model called once per view of each batch (views of one shape), the
    views' outputs in one loss."""
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    if dry_run:  # a summary before training, in training mode with gradients on
        net(torch.zeros(BATCH, 8))
    for _ in range(steps):
        x = torch.randn(BATCH, 8)
        outs = [net(x + 0.1 * torch.randn_like(x)) for _ in range(views)]
        sum(o.pow(2).mean() for o in outs).backward()
        opt.step()
        opt.zero_grad()


@pytest.mark.parametrize("dry_run", [False, True])
def test_a_model_called_once_per_view_of_a_batch_is_counted_for_every_call(recorder, dry_run):
    session = recorder(epochs=1)
    _train_views(_mlp(), 2, dry_run=dry_run)
    event = _flops(session)
    assert event["per_step"] == 2 * _mlp_hand_count(BATCH)
    assert event["per_sample"] == 2 * _mlp_hand_count(BATCH) / BATCH
    assert event["calls_per_batch"] == 2


def test_a_model_called_once_a_batch_after_a_dry_run_is_counted_once(recorder):
    session = recorder(epochs=1)
    _train_views(_mlp(), 1, dry_run=True)
    event = _flops(session)
    assert event["per_step"] == _mlp_hand_count(BATCH) and "calls_per_batch" not in event


def test_calls_of_different_shapes_in_a_step_are_each_counted_for_their_calls(recorder):
    session = recorder(epochs=1)
    net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for _ in range(4):  # a global view of the batch and two smaller local crops (a DINO's)
        x = torch.randn(BATCH, 8)
        loss = net(x).pow(2).mean() + sum(net(torch.randn(n, 8)).pow(2).mean() for n in (2, 2))
        loss.backward()
        opt.step()
        opt.zero_grad()
    event = _flops(session)
    assert event["per_step"] == _mlp_hand_count(BATCH) + 2 * _mlp_hand_count(2)
    assert event["per_sample"] == event["per_step"] / BATCH  # the samples of the biggest batch
    assert event["calls_per_batch"] == 3
    assert [(c["samples"], c["calls_per_batch"]) for c in event["calls"]] == [(BATCH, 1), (2, 2)]
    assert [c["flops"] for c in event["calls"]] == [_mlp_hand_count(BATCH), _mlp_hand_count(2)]


def _gan_step(g: nn.Module, d: nn.Module, opt_g, opt_d) -> None:
    """DCGAN's iteration: the discriminator on a real batch and on the generator's batch detached, stepped;
    then the generator through the discriminator's call on its batch, stepped."""
    real, noise = torch.randn(BATCH, 8), torch.randn(BATCH, 4)
    fake = g(noise)
    loss_d = d(real).pow(2).mean() + d(fake.detach()).pow(2).mean()
    loss_d.backward()
    opt_d.step()
    opt_d.zero_grad()
    d(fake).pow(2).mean().backward()
    opt_g.step()
    opt_g.zero_grad()
    opt_d.zero_grad()


def test_a_gans_generator_and_discriminator_calls_are_all_counted(recorder):
    session = recorder(epochs=1)
    torch.manual_seed(0)
    g, d = nn.Linear(4, 8, bias=False), _mlp()
    opt_g, opt_d = torch.optim.SGD(g.parameters(), lr=0.1), torch.optim.SGD(d.parameters(), lr=0.1)
    for _ in range(4):
        _gan_step(g, d, opt_g, opt_d)
    event = _flops(session)
    generator = 2 * BATCH * 4 * 8 * 2  # its product, then its weight's gradient (the noise needs none)
    # the discriminator on its generator's batch also passes a gradient back to that batch's input
    through = _mlp_hand_count(BATCH) + 2 * BATCH * 8 * 16
    assert event["per_step"] == 2 * _mlp_hand_count(BATCH) + through + generator
    assert event["per_sample"] == event["per_step"] / BATCH
    assert sorted((c["module"], c["calls_per_batch"], c["flops"]) for c in event["calls"]) == sorted(
        [("Sequential", 2, _mlp_hand_count(BATCH)), ("Sequential", 1, through), ("Linear", 1, generator)]
    )


def test_a_frozen_module_called_beside_the_model_is_counted_as_its_forward_pass(recorder):
    session = recorder(epochs=1)
    torch.manual_seed(0)
    frozen = nn.Linear(8, 8, bias=False).requires_grad_(False)  # a fixed feature extractor, in train mode
    net = _mlp()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for _ in range(4):
        nn.functional.cross_entropy(
            net(frozen(torch.randn(BATCH, 8))), torch.randint(0, 2, (BATCH,))
        ).backward()
        opt.step()
        opt.zero_grad()
    event = _flops(session)
    assert event["per_step"] == _mlp_hand_count(BATCH) + 2 * BATCH * 8 * 8


class TinyGPT(nn.Module):
    """nanoGPT's shape: token and position embeddings, one causal attention block, a head; it returns
    ``(logits, loss)`` and takes its targets as a keyword."""

    def __init__(self, vocab: int = 16, block: int = 8, embd: int = 8) -> None:
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, embd), nn.Embedding(block, embd)
        self.qkv = nn.Linear(embd, 3 * embd, bias=False)
        self.proj = nn.Linear(embd, embd)
        self.head = nn.Linear(embd, vocab, bias=False)

    def forward(self, idx: torch.Tensor, *, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        t = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(t, device=idx.device))
        q, k, v = self.qkv(x).split(x.shape[-1], dim=2)
        att = (q @ k.transpose(1, 2)) / math.sqrt(x.shape[-1])
        att = att.masked_fill(torch.ones(t, t, device=idx.device).tril() == 0, float("-inf")).softmax(-1)
        x = x + self.proj(att @ v)
        logits = self.head(x)
        return logits, nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten())


def test_a_nanogpt_shaped_model_returning_logits_and_loss_is_counted_from_its_loss(recorder):
    b, t, c, vocab = 2, 8, 8, 16
    session = recorder(epochs=1)
    torch.manual_seed(0)
    model = TinyGPT(vocab, t, c)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(4):  # nanoGPT's loop: batches sliced by hand, no loader
        idx = torch.randint(0, vocab, (b, t))
        _, loss = model(idx, targets=torch.roll(idx, -1, 1))
        loss.backward()
        opt.step()
        opt.zero_grad()
    # every product's operands need gradients (the embeddings train): backward = 2 x forward
    forward = 2 * b * t * (c * 3 * c + c * c + c * vocab) + 2 * (2 * b * t * t * c)
    event = _flops(session)
    assert event["per_step"] == 3 * forward
    assert event["per_sample"] == 3 * forward / b


def test_a_compiled_model_is_counted_as_the_model_it_wraps(recorder):
    session = recorder(epochs=1)
    _train(torch.compile(_mlp(), backend="eager"), steps=2)  # no C++ toolchain needed
    assert _flops(session)["per_step"] == _mlp_hand_count(BATCH)


@pytest.fixture
def process_group() -> Iterator[None]:
    """A one-rank gloo process group, as torchrun would start for DDP on a CPU. One test starts it: a
    second gloo group started in the same test worker made the processes it forked later (a local
    sweep's jobs) die with SIGSEGV before they ran."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_a_ddp_model_is_counted_as_the_model_it_wraps_and_an_fsdp_one_is_not(recorder, process_group):
    from torch.distributed.fsdp import fully_shard

    session = recorder(epochs=1)
    _train(nn.parallel.DistributedDataParallel(_mlp()))
    assert _flops(session)["per_step"] == _mlp_hand_count(BATCH)

    session = recorder(epochs=1)
    _train(fully_shard(_mlp()))
    why = "the model is sharded by FSDP (FSDPSequential): sharded parameters are not counted"
    assert _flops(session) == {"error": why}


class ReadsItsInput(nn.Module):
    """A model whose forward pass reads a value of its input: nothing to read on the meta device."""

    def __init__(self) -> None:
        super().__init__()
        self.net = _mlp()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x) * (2.0 if x.sum().item() > 0 else 1.0)


def test_a_model_the_counter_cannot_run_gives_the_counters_words_and_the_run_goes_on(recorder):
    session = recorder(epochs=1)
    _train(ReadsItsInput())
    run = finish(session)
    error = run.extra[mllog.FLOPS]["error"]
    assert error.startswith("RuntimeError: ") and "meta" in error
    assert run.epochs and run.epochs[0].step_s  # the run's timings are all there
    metrics = RunMetrics("cell", "local", BATCH, 0, "ok", step_s=0.1)
    throughput.run_figures(metrics, run)
    assert metrics.mfu is None and metrics.mfu_note == f"FLOPs not counted: {error}"


def test_a_model_that_raises_inside_a_submodule_call_leaves_the_nesting_right(recorder):
    session = recorder(epochs=1)
    net = _mlp()
    with pytest.raises(RuntimeError):
        net(torch.randn(BATCH, 3))  # a wrong shape: the first layer raises, its hook still runs
    assert session.usage.forward.depth == 0
    _train(net)
    assert _flops(session)["per_step"] == _mlp_hand_count(BATCH)


def test_inputs_padded_to_each_batchs_longest_count_the_mean_of_the_sampled_steps(recorder):
    session = recorder(epochs=1)
    net = _mlp()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for length in (3, 4, 2, 5):  # a sequence batch padded to its longest: a new shape every step
        net(torch.randn(BATCH, length, 8)).pow(2).mean().backward()
        opt.step()
        opt.zero_grad()
    event = _flops(session)
    # the first sampled step left out, the next two (lengths 4 and 2) made each call in half the steps
    assert event["per_step"] == (_mlp_hand_count(BATCH * 4) + _mlp_hand_count(BATCH * 2)) // 2
    assert [(c["calls_per_batch"], c["flops"]) for c in event["calls"]] == [
        (0.5, _mlp_hand_count(BATCH * 4)),
        (0.5, _mlp_hand_count(BATCH * 2)),
    ]
