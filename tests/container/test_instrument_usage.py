"""The precision and compile an instrumented script really trains with, seen by the hooks in this process
(:mod:`trainsweep.instrument.usage`) and read back from the run log it wrote."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.modules import module as nn_module
from torch.utils.data import DataLoader, TensorDataset

from trainsweep import axes
from trainsweep.instrument import usage

from .conftest import finish


def _loader(n: int) -> DataLoader:
    return DataLoader(TensorDataset(torch.randn(n, 8), torch.randint(0, 2, (n,))), batch_size=4)


def _train(net: nn.Module, *, steps: int = 4, autocast: torch.dtype | None = None) -> None:
    """``steps`` optimizer steps of ``net`` on a loader, the forward pass under CPU autocast when asked."""
    data = _loader(4 * steps)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for x, y in data:
        if autocast is None:
            out = net(x.to(next(net.parameters()).dtype))
        else:
            with torch.autocast("cpu", dtype=autocast):
                out = net(x)
        nn.functional.cross_entropy(out.float(), y).backward()
        opt.step()
        opt.zero_grad()


def _usage_hooks() -> int:
    """Global forward hooks (pre and post) of :mod:`trainsweep.instrument.usage` in place now."""
    hooks = [*nn_module._global_forward_pre_hooks.values(), *nn_module._global_forward_hooks.values()]
    return sum(1 for h in hooks if h.__module__ == usage.__name__)


def _net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))


def test_a_forward_pass_under_bfloat16_autocast_is_recorded_as_bfloat16(recorder):
    session = recorder(epochs=1)
    _train(_net(), autocast=torch.bfloat16)
    run = finish(session)
    assert run.extra[axes.PRECISION_KEY] == "bfloat16"
    assert run.extra[axes.COMPILED_KEY] is False


def test_without_autocast_a_float32_model_is_recorded_as_float32(recorder):
    session = recorder(epochs=1)
    _train(_net())
    run = finish(session)
    assert run.extra[axes.PRECISION_KEY] == "float32"


def test_a_model_cast_to_bfloat16_trains_in_bfloat16_without_autocast(recorder):
    session = recorder(epochs=1)
    _train(_net().to(torch.bfloat16))
    assert finish(session).extra[axes.PRECISION_KEY] == "bfloat16"


def test_autocast_on_another_device_than_the_models_does_not_count(recorder):
    session = recorder(epochs=1)
    net = _net()
    data = _loader(12)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for x, y in data:
        with torch.autocast("cuda", dtype=torch.float16, enabled=torch.cuda.is_available()):
            out = net(x)  # the model is on the CPU: CUDA autocast leaves it in float32
        nn.functional.cross_entropy(out, y).backward()
        opt.step()
        opt.zero_grad()
    assert finish(session).extra[axes.PRECISION_KEY] == "float32"


def test_the_hook_is_gone_after_the_sampled_steps(recorder):
    session = recorder(epochs=1)
    assert _usage_hooks() == 2
    net, data = _net(), _loader(40)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for i, (x, y) in enumerate(data):
        nn.functional.cross_entropy(net(x), y).backward()
        opt.step()
        opt.zero_grad()
        if i + 1 == usage.SAMPLE_STEPS:
            assert _usage_hooks() == 0  # no per-step cost from here on
    finish(session)


def test_torch_compile_is_recorded_and_the_hook_leaves_before_the_compiler_traces(recorder):
    session = recorder(epochs=1)
    compiled = torch.compile(_net(), backend="eager")  # no C++ toolchain needed
    _train(compiled, steps=2)
    assert _usage_hooks() == 0
    run = finish(session)
    assert run.extra[axes.COMPILED_KEY] is True
    assert run.extra[axes.PRECISION_KEY] == "float32"


def test_a_script_that_never_compiles_is_recorded_as_not_compiled_even_with_few_steps(recorder):
    session = recorder(epochs=1)
    _train(_net(), steps=1)
    run = finish(session)
    assert run.extra[axes.COMPILED_KEY] is False and run.extra[axes.PRECISION_KEY] == "float32"


class SelfCasting(nn.Module):
    """A model whose own forward turns autocast on."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(8, 16), nn.Linear(16, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return self.b(torch.relu(self.a(x)))


def test_autocast_turned_on_inside_the_models_forward_is_seen(recorder):
    session = recorder(epochs=1)
    _train(SelfCasting())
    assert finish(session).extra[axes.PRECISION_KEY] == "bfloat16"


def test_a_model_compiled_in_place_is_recorded_as_compiled_and_its_precision_left_unsaid(recorder):
    session = recorder(epochs=1)
    net = _net()
    net.compile(backend="eager")
    _train(net, steps=2)
    run = finish(session)
    assert run.extra[axes.COMPILED_KEY] is True
    assert axes.PRECISION_KEY not in run.extra  # its modules ran only inside the compiled code: not judged


class CastsItsWeights(nn.Module):
    """A layer that keeps float32 parameters and computes in bfloat16 without autocast, as mixed-precision
    wrappers do (FSDP casts the parameters for the forward pass)."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(2, 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.linear(x.bfloat16(), self.weight.bfloat16())


def test_float32_parameters_cast_for_the_forward_pass_train_in_what_they_were_cast_to(recorder):
    session = recorder(epochs=1)
    _train(CastsItsWeights())
    assert finish(session).extra[axes.PRECISION_KEY] == "bfloat16"
