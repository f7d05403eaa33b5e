"""Reversible monkeypatches of moto internals (the embedded AWS is in-process, so patches are global)."""

from __future__ import annotations

from typing import Any


class Patches:
    """Set attributes on objects and put the originals back on :meth:`restore` (last set, first restored)."""

    def __init__(self) -> None:
        self._saved: list[tuple[Any, str, Any, bool]] = []

    def set(self, target: Any, name: str, value: Any) -> Any:
        """Replace ``target.name`` by ``value``; return the original (None when it did not exist)."""
        had = name in vars(target) if isinstance(target, type) else hasattr(target, name)
        original = getattr(target, name, None)
        self._saved.append(
            (target, name, vars(target).get(name) if isinstance(target, type) else original, had)
        )
        setattr(target, name, value)
        return original

    def set_item(self, mapping: Any, key: str, value: Any) -> None:
        """Replace ``mapping[key]`` by ``value`` until :meth:`restore`."""
        self._saved.append((mapping, key, mapping.get(key), key in mapping))
        mapping[key] = value

    def restore(self) -> None:
        while self._saved:
            target, name, original, had = self._saved.pop()
            if isinstance(target, dict):
                if had:
                    target[name] = original
                else:
                    target.pop(name, None)
            elif had:
                setattr(target, name, original)
            else:
                delattr(target, name)
