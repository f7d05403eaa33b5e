"""The sweep drivers: what ``trainsweep run``, ``status`` and ``download`` do, callable from Python.

One module per driver, each returning plain data (:class:`~trainsweep.sweeps.result.SweepRun` for a run)
and telling a :class:`~trainsweep.sweeps.result.SweepEvents` what happens on the way:

- :mod:`~trainsweep.sweeps.local`: a sweep (or its resume) on this machine, through the embedded AWS;
- :mod:`~trainsweep.sweeps.cloud`: a sweep (or its resume) in the deployed stack;
- :mod:`~trainsweep.sweeps.phases`: ``phases: [scan, confirm]``, two sweeps in a row;
- :mod:`~trainsweep.sweeps.status`: a sweep's cells, from its folder or the stack, once or until it ends;
- :mod:`~trainsweep.sweeps.download`: results and logs (models on request) from the stack's bucket;
- :mod:`~trainsweep.sweeps.results`: a downloaded sweep's table and recommendation (pandas).

:mod:`trainsweep.api` puts them behind ``from trainsweep import plan, run, status, watch, download, load``;
the CLI renders them. Nothing here is imported by ``import trainsweep``.
"""
