"""Small seed-style logs of a sweep over ``dtype``, filed in folders named for the setting.

Made-up timings whose answer differs per instance type: on ml.g5.xlarge bfloat16 trains faster than
float32, on ml.g6.xlarge slower. Two repetitions of each configuration: the second's epochs take a second
longer each.
"""

from __future__ import annotations

from pathlib import Path

G5, G6 = "ml.g5.xlarge", "ml.g6.xlarge"
VMTYPE = {G5: "g5-1", G6: "g6-1"}
EPOCHS: dict[tuple[str, str, int], tuple[float, float]] = {
    # (instance type, dtype, batch size) -> the first repetition's two epoch times (s)
    (G5, "float32", 256): (30.0, 20.0),
    (G5, "float32", 512): (28.0, 18.0),
    (G5, "bfloat16", 256): (16.0, 10.0),
    (G5, "bfloat16", 512): (14.0, 9.0),
    (G6, "float32", 256): (18.0, 12.0),
    (G6, "float32", 512): (17.5, 11.5),
    (G6, "bfloat16", 256): (40.0, 30.0),
    (G6, "bfloat16", 512): (38.0, 28.0),
}
REPETITIONS = 2


def epochs_of(itype: str, dtype: str, batch_size: int, repetition: int) -> tuple[float, float]:
    first, second = EPOCHS[(itype, dtype, batch_size)]
    return first + repetition, second + repetition


def time_to_train(itype: str, dtype: str, batch_size: int) -> float:
    """The configuration's mean time to train its two epochs over the repetitions."""
    return sum(sum(epochs_of(itype, dtype, batch_size, k)) for k in range(REPETITIONS)) / REPETITIONS


def seed_log(batch_size: int, epochs: tuple[float, ...], steps: int = 4) -> str:
    """A seed-style (cloud-ML) log whose epochs take ``epochs`` seconds."""
    lines = [f"python3 train.py --batch-size {batch_size} --epochs {len(epochs)}", "Initialization time 0.5"]
    for e, epoch_s in enumerate(epochs, 1):
        lines.append(f"Epoch {e}/{len(epochs)}")
        step = (epoch_s - 0.5) / steps
        lines += [f"{s} step training time: {step:.6f}s" for s in range(1, steps + 1)]
        lines += ["Validation time: 0.5s", f"Epoch time: {epoch_s}s"]
    lines.append(f"Duracao do treinamento: {sum(epochs)}")
    return "\n".join(lines) + "\n"


def write_axis_logs(root: Path, experiment: str = "exp", slower: float = 0.0) -> Path:
    """``root/<experiment>/dtype=<value>/logs/result-<VMTYPE>-<BS>-e<N>.txt`` for every cell of
    :data:`EPOCHS` and repetition, each epoch ``slower`` seconds longer; returns ``root``."""
    for itype, dtype, bs in EPOCHS:
        folder = root / experiment / f"dtype={dtype}" / "logs"
        folder.mkdir(parents=True, exist_ok=True)
        for k in range(REPETITIONS):
            name = f"result-{VMTYPE[itype]}-{bs}-e{k}.txt"
            epochs = tuple(e + slower for e in epochs_of(itype, dtype, bs, k))
            (folder / name).write_text(seed_log(bs, epochs))
    return root


def long_seed_log(batch_size: int, step_s: float, seed: int, epochs: int = 20, steps: int = 100) -> str:
    """A longer seed-style log: ``epochs`` epochs of ``steps`` steps of about ``step_s`` seconds (± 3 %,
    drawn from ``seed``; the first step 10x), one second of validation each, so early stop can stop."""
    import random

    rng = random.Random(seed)
    lines = [f"python3 train.py --batch-size {batch_size} --epochs {epochs}", "Initialization time 0.5"]
    for e in range(1, epochs + 1):
        lines.append(f"Epoch {e}/{epochs}")
        times = [step_s * rng.uniform(0.97, 1.03) * (10 if e == 1 and s == 1 else 1) for s in range(steps)]
        lines += [f"{s} step training time: {t:.6f}s" for s, t in enumerate(times, 1)]
        lines += ["Validation time: 1.0s", f"Epoch time: {sum(times) + 1.0:.6f}s"]
    return "\n".join(lines) + "\n"


def write_long_axis_logs(root: Path, repetitions: int = 3) -> Path:
    """:func:`write_axis_logs`' grid as :func:`long_seed_log` logs, each configuration's step time its
    :data:`EPOCHS` first epoch over 100 (so the ranking is the same), ``repetitions`` of each."""
    for n, (itype, dtype, bs) in enumerate(EPOCHS):
        folder = root / "exp" / f"dtype={dtype}" / "logs"
        folder.mkdir(parents=True, exist_ok=True)
        for k in range(repetitions):
            step_s = EPOCHS[(itype, dtype, bs)][0] / 100
            text = long_seed_log(bs, step_s, seed=100 * n + k)
            (folder / f"result-{VMTYPE[itype]}-{bs}-e{k}.txt").write_text(text)
    return root
