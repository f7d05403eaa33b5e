"""The training workloads the container knows, each with its dataset: the one list every part reads.

The spec validates ``workload.model`` against it, the container's config accepts exactly these names, and
``trainsweep.training`` keeps one dataset description and one model builder per name (tested to agree).
"""

from __future__ import annotations

WORKLOADS: dict[str, str] = {"mnist-cnn": "mnist", "resnet50-cifar10": "cifar10"}
"""Workload name -> the dataset it trains on."""

NAMES: tuple[str, ...] = tuple(WORKLOADS)
