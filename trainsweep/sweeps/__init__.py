"""The sweep drivers: what ``trainsweep run``, ``status`` and ``download`` do, callable from Python.

One module per driver, each returning plain data (:class:`~trainsweep.sweeps.result.SweepRun` for a run)
and telling a :class:`~trainsweep.sweeps.result.SweepEvents` what happens on the way:

- :mod:`~trainsweep.sweeps.local`: a sweep (or its resume) on this machine, through the embedded AWS.

The CLI renders them.
"""
