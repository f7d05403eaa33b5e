"""Streaming log parsers: every log dialect -> one :class:`RunTimings` (see docs/log-formats.md)."""

from trainsweep.logs.model import Epoch, Problem, RunHeader, RunTimings
from trainsweep.logs.parser import parse

__all__ = ["Epoch", "Problem", "RunHeader", "RunTimings", "parse"]
