"""Whether a run honoured its setting of the axes, where its record can tell: what it really trained with
against what the setting asked for. A script that ignores an axis (nanoGPT on a CPU leaves out autocast
whatever its ``dtype`` says) would otherwise report one run under two settings.

* An axis named ``dtype`` or ``precision`` whose value names a precision (``bfloat16``, ``bf16``,
  ``bf16-mixed``, ``float16``, ``fp16``, ``half``, ``16-mixed``, ``float32``, ``fp32``, ``32`` ...)
  against the precision the run trained in (:data:`trainsweep.axes.PRECISION_KEY`: a built-in's checked
  output, an instrumented script's first training steps).
* An axis named ``compile`` whose value is true or false against whether the script called
  ``torch.compile`` (:data:`trainsweep.axes.COMPILED_KEY`, an instrumented script's).

A run whose log does not say (a seed log, a value that names no precision) is not judged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainsweep import axes

PRECISION_AXES = frozenset({"dtype", "precision"})
COMPILE_AXES = frozenset({"compile"})
_PRECISIONS = {
    "bfloat16": ("bfloat16", "bf16", "bf16-mixed", "bf16-true"),
    "float16": ("float16", "fp16", "half", "16", "16-mixed", "16-true"),
    "float32": ("float32", "fp32", "float", "32", "32-true"),
    "float64": ("float64", "fp64", "double", "64", "64-true"),
}
PRECISION_SPELLINGS = {spelled: name for name, spellings in _PRECISIONS.items() for spelled in spellings}
"""An axis value (lower case) -> the precision it asks for, as PyTorch names the dtype."""
_TRUE, _FALSE = frozenset({"true", "1", "yes", "on"}), frozenset({"false", "0", "no", "off"})


def precision_asked(value: Any) -> str | None:
    """The precision an axis value asks for (``bf16`` -> ``bfloat16``); None when it names none."""
    return PRECISION_SPELLINGS.get(axes.text(value).lower()) if isinstance(value, axes.AxisValue) else None


def compile_asked(value: Any) -> bool | None:
    """Whether an axis value asks for compiling (``true``, ``1``, ``yes`` ...); None when it says neither."""
    said = axes.text(value).lower() if isinstance(value, axes.AxisValue) else ""
    return True if said in _TRUE else False if said in _FALSE else None


def not_honoured(setting: Mapping[str, Any], extra: Mapping[str, Any]) -> list[str]:
    """What of ``setting`` the run did not do, one sentence per axis, from its record's ``extra``; ``[]``
    when it did all it can be checked on."""
    used = extra.get(axes.PRECISION_KEY)
    compiled = extra.get(axes.COMPILED_KEY)
    out = []
    for name, value in setting.items():
        key = name.lower()
        said = f"{name}={axes.text(value)}"
        if key in PRECISION_AXES and isinstance(used, str):
            asked = precision_asked(value)
            if asked is not None and asked != used:
                out.append(f"{said} not honoured: the run trained in {used}")
        elif key in COMPILE_AXES and isinstance(compiled, bool):
            wanted = compile_asked(value)
            if wanted is not None and wanted != compiled:
                did = "called torch.compile" if compiled else "never called torch.compile"
                out.append(f"{said} not honoured: the script {did}")
    return out
