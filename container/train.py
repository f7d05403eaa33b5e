#!/usr/bin/env python3
"""SageMaker training entry point of the trainsweep image (also run as a process by local mode).

Reads ``<base>/input/config/hyperparameters.json`` and the ``train`` channel, writes ``<base>/model``
and ``<base>/output`` (``failure`` on error), where ``<base>`` is ``/opt/ml`` unless
``SAGEMAKER_BASE_DIR`` says otherwise. See docs/container.md.
"""

import sys

from trainsweep.training.supervisor import main

if __name__ == "__main__":
    sys.exit(main())
