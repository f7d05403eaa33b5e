"""Started by Python in every process of a trainsweep command job: see :mod:`trainsweep.instrument.inject`."""

import sys
from pathlib import Path

try:
    from trainsweep.instrument import inject
except ImportError:  # trainsweep is not installed where the command's Python looks: use this copy
    sys.path.append(str(Path(__file__).resolve().parents[3]))
    from trainsweep.instrument import inject

inject.start()
