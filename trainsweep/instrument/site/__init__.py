"""The folder a command job puts first on ``PYTHONPATH`` (see :mod:`trainsweep.instrument.inject`)."""
