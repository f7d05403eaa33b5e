"""The command form of a script job (``workload.command``): a command line template, split into words once.

A command is what a user already types to train, with placeholders for what the sweep sets::

    python train.py config/train_shakespeare_char.py --batch_size={batch_size} --max_iters={steps}
    torchrun --nproc_per_node={gpus} train.py --batch-size {batch_size}

It is split with :func:`shlex.split` when the sweep is planned and travels as a list of words; each word's
placeholders are replaced by their values in the job, word by word, and the words start a process
directly: no shell ever reads a value, so a value holding ``;`` or ``$(...)`` is one argument, as written.
``{{`` and ``}}`` stand for literal braces. The script the command names (:func:`named_target`) is the
process trainsweep times. This module is pure (no torch, no process).
"""

from __future__ import annotations

import shlex
import string
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

BATCH_SIZE, EPOCHS, STEPS, INSTANCE_COUNT, GPUS = "batch_size", "epochs", "steps", "instance_count", "gpus"
BATCH_SIZE_PER_DEVICE = "batch_size_per_device"
"""The batch size over the job's processes (instances x GPUs; a CPU host is one): for scripts whose
``--batch_size`` is each rank's share (DDP examples), while ``{batch_size}`` is the sweep's global one."""
NODE_RANK, MASTER_ADDR, MASTER_PORT = "node_rank", "master_addr", "master_port"
"""A multi-instance launcher's rendezvous: this host's index among the job's hosts, where the first one
listens."""
PLACEHOLDERS = (
    BATCH_SIZE, EPOCHS, STEPS, INSTANCE_COUNT, GPUS, BATCH_SIZE_PER_DEVICE,
    NODE_RANK, MASTER_ADDR, MASTER_PORT,
)  # fmt: skip
"""What the sweep sets in every command; a spec's hyperparameters add their own names."""

_FORMATTER = string.Formatter()


class CommandError(ValueError):
    """A command (or argument) template that cannot be used; the message says what to change."""


def split(text: str) -> list[str]:
    """The words of a command line, as a POSIX shell splits them (quotes kept together, no expansion).

    Raises:
        CommandError: unbalanced quotes (shlex's own words), or an empty command.
    """
    try:
        words = shlex.split(text)
    except ValueError as e:
        raise CommandError(f"cannot split the command into words: {e}") from None
    if not words:
        raise CommandError("the command is empty")
    return words


def _pieces(word: str) -> list[tuple[str, str | None]]:
    """(literal text, placeholder name or None) of a word; raises CommandError for a bad brace."""
    try:
        parsed = list(_FORMATTER.parse(word))
    except ValueError as e:
        raise CommandError(
            f"{word!r}: {e} (a placeholder is {{name}}; write a literal brace as {{{{ or }}}})"
        ) from None
    out: list[tuple[str, str | None]] = []
    for literal, name, spec, conversion in parsed:
        if name is not None and (spec or conversion):
            raise CommandError(
                f"{word!r}: a placeholder is a plain {{name}}, without a format or a conversion "
                f"({{{name}{'!' + conversion if conversion else ''}{':' + spec if spec else ''}}})"
            )
        out.append((literal, name))
    return out


def placeholders(words: Iterable[str]) -> list[str]:
    """The placeholder names the words use, in order of first use.

    Raises:
        CommandError: a lone brace, or a placeholder with a format or a conversion.
    """
    seen: dict[str, None] = {}
    for word in words:
        for _, name in _pieces(word):
            if name is not None:
                seen.setdefault(name, None)
    return list(seen)


def check(words: Iterable[str], known: Iterable[str]) -> list[str]:
    """The placeholders the words use; raises :class:`CommandError` naming one that is not ``known``."""
    allowed = list(dict.fromkeys(known))
    used = placeholders(words)
    for name in used:
        if name not in allowed:
            raise CommandError(
                f"unknown placeholder {{{name}}}: the known ones are "
                f"{', '.join('{' + k + '}' for k in allowed)} (workload.hyperparameters adds its names); "
                "write a literal brace as {{ or }}"
            )
    return used


def render(words: Iterable[str], values: Mapping[str, str]) -> list[str]:
    """Each word with its placeholders replaced by ``values`` (one word stays one word, whatever a value
    holds).

    Raises:
        CommandError: a placeholder without a value.
    """
    out = []
    for word in words:
        text = []
        for literal, name in _pieces(word):
            text.append(literal)
            if name is not None:
                if name not in values:
                    raise CommandError(f"no value for the placeholder {{{name}}} in {word!r}")
                text.append(values[name])
        out.append("".join(text))
    return out


@dataclass(frozen=True)
class Target:
    """The Python program a command runs as its training process: a script file or a module."""

    kind: str  # script | module
    name: str  # the script's path as written (relative to the source dir) or the module's dotted name


def named_target(words: list[str]) -> Target | None:
    """The training program a command names, None when it names none.

    The rule, for any launcher: the first word that ends in ``.py`` and is not an option is the script
    (``python train.py``, ``torchrun --nproc_per_node=4 train.py``, ``accelerate launch train.py``,
    ``deepspeed train.py``); without one, the module after the last ``-m`` (``python -m pkg.train``,
    ``torchrun -m pkg.train``). A word with a placeholder names nothing.
    """
    module: str | None = None
    for i, word in enumerate(words):
        if "{" in word:
            continue
        if not word.startswith("-") and word.endswith(".py"):
            return Target("script", word)
        if word == "-m" and i + 1 < len(words) and "{" not in words[i + 1]:
            module = words[i + 1]
    return Target("module", module) if module else None


def program_has_placeholder(words: list[str]) -> bool:
    """Whether the first word (the program) uses a placeholder: it must be known when the job starts."""
    return bool(words) and bool(placeholders(words[:1]))
