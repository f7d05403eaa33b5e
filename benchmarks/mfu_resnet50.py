"""MFU of the built-in ResNet-50 set against a hand calculation.

The hand calculation counts the multiply-adds of every convolution and of the classifier from the
architecture alone (no PyTorch): a bottleneck block's 1x1 reduce at its input's resolution, its 3x3 (which
carries the stride) and 1x1 expand at its output's, and the projection shortcut where the shape changes.
ImageNet's ResNet-50 at 224 x 224 comes to about 4.1 G multiply-adds a forward pass; a training step is
about 3 x 2 FLOPs per multiply-add (the backward pass computes the input's and the weights' gradients, each
as much as the forward pass).

``--run`` trains it on this machine's GPU as SageMaker runs the planned job of ``gpu_axes.py``'s spec (the
container's entry point; synthetic data, a packed job over ``dtype`` float32 / bfloat16 x the batch sizes, a
few dozen steps each) and prints the same comparison from its logs::

    python benchmarks/mfu_resnet50.py --run [--batch-sizes 256,512,1024] [--steps 60]

With a results folder of a sweep of the built-in ``resnet50-cifar10`` (``sweep.csv`` with ``dtype`` and
``mfu`` columns), prints per row the report's MFU, the hand calculation's and their ratio::

    python benchmarks/mfu_resnet50.py RESULTS_DIR --gpu H100

Without a folder, prints the hand counts and the FLOP counter's for the same models (CPU, no timing).
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

STAGES = (3, 4, 6, 3)
EXPANSION = 4
TRAINING_FACTOR = 3 * 2
"""FLOPs of a training step per multiply-add of the forward pass (forward + two gradients, 2 per MAC)."""
PEAK_OF_DTYPE = {"float32": "tf32", "bfloat16": "bf16", "float16": "fp16"}
"""The precision a dtype's convolutions run in on an NVIDIA GPU of compute capability 8.0 or later
(PyTorch lets cuDNN use TF32 for float32 convolutions by default)."""


def resnet50_macs(image: int, *, cifar_stem: bool, classes: int) -> int:
    """Multiply-adds of one forward pass of one ``image`` x ``image`` RGB sample (convolutions and the
    classifier). ``cifar_stem``: a 3x3 stride-1 stem without max-pool (the built-in's), else ImageNet's
    7x7 stride-2 stem and 3x3 stride-2 max-pool."""
    if cifar_stem:
        size, macs = image, image * image * 3 * 64 * 9
    else:
        half = image // 2
        size, macs = half // 2, half * half * 3 * 64 * 49
    in_ch = 64
    for i, blocks in enumerate(STAGES):
        width = 64 * 2**i
        out_ch = width * EXPANSION
        for b in range(blocks):
            stride = 2 if i > 0 and b == 0 else 1
            out = size // stride
            macs += size * size * in_ch * width  # 1x1 reduce
            macs += out * out * 9 * width * width  # 3x3, carries the stride
            macs += out * out * width * out_ch  # 1x1 expand
            if stride != 1 or in_ch != out_ch:
                macs += out * out * in_ch * out_ch  # projection shortcut
            in_ch, size = out_ch, out
    return macs + in_ch * classes


def hand_flops_per_sample(image: int = 32, *, cifar_stem: bool = True, classes: int = 10) -> int:
    """FLOPs of a training step per sample by the hand calculation."""
    return TRAINING_FACTOR * resnet50_macs(image, cifar_stem=cifar_stem, classes=classes)


def compare(results: Path, gpu: str) -> int:
    from trainsweep.accelerators import ACCELERATORS

    chip = ACCELERATORS[gpu]
    per_sample = hand_flops_per_sample()
    print(f"hand count: {per_sample / 1e9:.3f} GFLOPs per sample and step; peaks of {chip.key}")
    print("batch_size,dtype,samples_per_s,mfu_report,mfu_hand,ratio")
    worst, compared = 0.0, 0
    with (results / "sweep.csv").open() as f:
        for row in csv.DictReader(f):
            if row.get("status") != "ok" or not row.get("mfu"):
                continue
            peak = chip.peak(PEAK_OF_DTYPE[row.get("dtype") or "float32"])
            gpus = int(row.get("gpus") or 1) or 1
            hand = float(row["samples_per_s"]) * per_sample / ((peak or 0) * 1e12 * gpus)
            ratio = float(row["mfu"]) / hand
            worst = max(worst, abs(ratio - 1))
            compared += 1
            print(
                f"{row['batch_size']},{row.get('dtype')},{row['samples_per_s']},{row['mfu']},{hand:.4f},{ratio:.3f}"
            )
    print(f"largest difference: {worst:.1%} over {compared} rows with an MFU")
    return 0 if compared and worst <= 0.10 else 1


def _compare_row(label: str, samples_per_s: float, mfu: float | None, peak: float | None, gpus: int) -> float:
    hand = samples_per_s * hand_flops_per_sample() / ((peak or float("nan")) * 1e12 * gpus)
    ratio = (mfu or float("nan")) / hand
    print(f"{label},{samples_per_s:.1f},{mfu},{hand:.4f},{ratio:.3f}")
    return abs(ratio - 1)


def run(batch_sizes: list[int], steps: int, out: Path) -> int:
    """The planned job of ``gpu_axes.py``'s spec (dtype x ``batch_sizes``, ``steps`` a cell) on this GPU, as
    SageMaker runs it, and each cell's report MFU against the hand calculation."""
    import argparse
    import json

    from gpu_axes import run_job, spec

    from trainsweep.cost.metrics import run_metrics
    from trainsweep.cost.throughput import accelerator_of
    from trainsweep.logs import mllog, parse
    from trainsweep.spec import plan_sweep

    sizes = ",".join(map(str, batch_sizes))
    a = argparse.Namespace(smoke=False, epochs=1, batch_sizes=sizes, samples=None, eval_batches=1)
    a.steps = steps
    (job,) = plan_sweep(spec(a), sweep_id="mfu").jobs
    hyper = dict(job.hyperparameters)
    out.mkdir(parents=True, exist_ok=True)
    code = run_job(hyper, out, out / "job-output.txt")
    names, settings = hyper["run-names"].split(","), json.loads(hyper["trainsweep-axes"])
    cells = zip(names, hyper["batch-sizes"].split(","), settings, strict=True)
    print("label,samples_per_s,mfu_report,mfu_hand,ratio")
    worst, compared = 0.0, 0
    for name, bs, setting in cells:
        dtype = setting["dtype"]
        log = out / "output" / "data" / "logs" / f"{name}.log"
        if not log.is_file():
            print(f"{name}: no log")
            continue
        run_ = parse(log)
        job_record = {"instance_type": "local_gpu", "status": "completed", "batch_size": int(bs)}
        m = run_metrics(run_, epochs=1, job=job_record)
        event = run_.extra.get(mllog.FLOPS) or {}
        chip = accelerator_of("local_gpu", event.get("device"))
        peak = chip.peak(PEAK_OF_DTYPE[dtype]) if chip else None
        print(f"# {name}: {event.get('precision')} on {event.get('device')}; {m.mfu_note}")
        if m.samples_per_s:
            worst = max(worst, _compare_row(f"{dtype}-{bs}", m.samples_per_s, m.mfu, peak, 1))
            compared += 1
    print(f"largest difference: {worst:.1%} over {compared} of {len(names)} cells; entry point exit {code}")
    return 0 if compared == len(names) and worst <= 0.10 and code == 0 else 1


def counts() -> None:
    from torch import nn

    from trainsweep.instrument.flops import count_on_meta
    from trainsweep.training.models import ResNet50

    def imagenet() -> nn.Module:
        m = ResNet50(classes=1000)
        m.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                               nn.MaxPool2d(3, 2, 1))  # fmt: skip
        return m

    for name, build, image, cifar, classes in (
        ("built-in (CIFAR stem), 32x32", ResNet50, 32, True, 10),
        ("ImageNet stem, 224x224", imagenet, 224, False, 1000),
    ):
        hand = hand_flops_per_sample(image, cifar_stem=cifar, classes=classes)
        counted = count_on_meta(build, (3, image, image), 2).flops / 2
        print(f"{name}: hand {hand / 1e9:.3f} GFLOPs, counter {counted / 1e9:.3f} ({counted / hand:.3f})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="?", type=Path, help="results folder holding sweep.csv")
    ap.add_argument("--gpu", default="H100", help="accelerator key of trainsweep.accelerators")
    ap.add_argument("--run", action="store_true", help="train on this machine's GPU and compare")
    ap.add_argument("--batch-sizes", default="256,512,1024")
    ap.add_argument("--steps", type=int, default=60, help="training steps per cell")
    ap.add_argument("--out", type=Path, default=Path("mfu-run"), help="the job's folder (--run)")
    args = ap.parse_args()
    if args.run:
        return run([int(b) for b in args.batch_sizes.split(",")], args.steps, args.out)
    if args.results is None:
        counts()
        return 0
    return compare(args.results, args.gpu)


if __name__ == "__main__":
    sys.exit(main())
