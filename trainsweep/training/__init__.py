"""The training container's code: the SageMaker contract, the log it writes and delivers, the workloads.

``container/train.py`` runs :func:`trainsweep.training.supervisor.main`; the supervisor validates the
job, starts the worker (``python -m trainsweep.training.worker``, or torchrun for several GPUs),
uploads the logs as they grow and once more at the end, and writes the ``failure`` file. Only the
worker imports torch.
"""
