"""The FLOP count of one training step (PyTorch's FlopCounterMode on the meta device) against a hand count of
ResNet-50's multiply-adds, and the precision whose peak a count is set against."""

from __future__ import annotations

import pytest
import torch
from mfu_resnet50 import hand_flops_per_sample, resnet50_macs
from torch import nn

from trainsweep.instrument import flops
from trainsweep.training.models import ResNet50


def _imagenet_resnet50() -> nn.Module:
    model = ResNet50(classes=1000)
    model.stem = nn.Sequential(
        nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)
    )
    return model


def test_the_hand_count_of_imagenet_resnet50_is_the_published_4_1_g_multiply_adds() -> None:
    assert resnet50_macs(224, cifar_stem=False, classes=1000) == pytest.approx(4.09e9, rel=0.01)


def test_the_counter_matches_the_hand_count_of_resnet50_at_224_within_10_percent() -> None:
    counted = flops.count_on_meta(_imagenet_resnet50, (3, 224, 224), 2)
    hand = hand_flops_per_sample(224, cifar_stem=False, classes=1000)  # 3 x 2 x 4.1 G
    assert counted.flops / counted.samples == pytest.approx(hand, rel=0.10)
    assert counted.conv_share > 0.99


def test_the_counter_matches_the_hand_count_of_the_builtin_resnet50() -> None:
    counted = flops.count_on_meta(ResNet50, (3, 32, 32), 4)
    assert counted.flops / 4 == pytest.approx(hand_flops_per_sample(32), rel=0.10)


def test_the_count_grows_with_the_batch_and_needs_no_memory_for_it() -> None:
    counted = flops.count_on_meta(ResNet50, (3, 32, 32), 1024)
    assert counted.flops == 1024 * flops.count_on_meta(ResNet50, (3, 32, 32), 1).flops


@pytest.mark.parametrize(
    ("dtype", "tf32_conv", "tf32_matmul", "expected"),
    [
        ("bfloat16", False, False, "bf16"),
        ("float16", True, True, "fp16"),
        ("float32", True, False, "tf32"),  # a convolution network, cuDNN on TF32
        ("float32", False, True, "fp32"),  # its matmuls may, its convolutions may not
        ("float32", False, False, "fp32"),
    ],
)
def test_the_peak_precision_is_the_one_most_flops_run_in(dtype, tf32_conv, tf32_matmul, expected) -> None:
    step = flops.count_on_meta(ResNet50, (3, 32, 32), 1)
    assert flops.peak_precision(dtype, step, tf32_conv=tf32_conv, tf32_matmul=tf32_matmul) == expected


def test_a_cpu_allows_no_tf32_and_its_event_names_no_accelerator() -> None:
    assert flops.tf32_allowed(torch.device("cpu")) == (False, False)
    event = flops.builtin_event(
        ResNet50, (3, 32, 32), batch=8, dtype="float32", device=torch.device("cpu"), world_size=2
    )
    one = flops.count_on_meta(ResNet50, (3, 32, 32), 8).flops
    assert event["per_step"] == 2 * one and event["per_sample"] == one / 8
    assert (event["precision"], event["device"], event["accelerators"]) == ("fp32", "cpu", 0)


def test_a_model_the_counter_cannot_run_gives_the_reason_not_a_figure() -> None:
    def broken() -> nn.Module:
        raise RuntimeError("no meta kernel for this op\nmore")

    event = flops.builtin_event(
        broken, (1,), batch=1, dtype="float32", device=torch.device("cpu"), world_size=1
    )
    assert event == {"error": "RuntimeError: no meta kernel for this op"}
