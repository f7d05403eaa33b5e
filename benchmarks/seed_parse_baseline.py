"""Baseline for bench_parse.py: the algorithm of the seed's ``parse-exec-times.py``, re-created from its
description (not its code): read the log from stdin line by line, try about a dozen regular expressions on
every line, and accumulate the results in a dict shaped like ``execution-times/<VMTYPE>/<BS>/e<N>.json``.

Run as a script: ``python benchmarks/seed_parse_baseline.py < result-p3-1-256-e0.txt``.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable


def parse_lines(lines: Iterable[str]) -> dict:
    """The seed's per-line loop: every pattern is tried on every line."""
    out: dict = {
        "init": -1.0,
        "total_training": -1.0,
        "largest_real_time_delta": -1.0,
        "fit_time": -1.0,
        "write_model_time": -1.0,
        "epochs": {},
    }
    epoch = "0"
    first_real = last_real = None
    for line in lines:
        m = re.search(r"\('Tempo de inicializacao: ', ([0-9.e+-]+)\)", line)
        if m:
            out["init"] = float(m.group(1))
        m = re.search(r"^Epoch (\d+)/(\d+)", line)
        if m:
            epoch = m.group(1)
            out["epochs"].setdefault(epoch, {"steps": {}})
        m = re.search(r"^(\d+) step training time: ([0-9.e+-]+)", line)
        if m:
            out["epochs"].setdefault(epoch, {"steps": {}})["steps"][m.group(1)] = float(m.group(2))
        m = re.search(r"^(\d+) steps training: ([0-9.e+-]+)", line)
        if m:
            out["epochs"].setdefault(epoch, {"steps": {}})["steps"][m.group(1)] = float(m.group(2))
        m = re.search(r"^Validation time: ([0-9.e+-]+)", line)
        if m:
            out["epochs"].setdefault(epoch, {"steps": {}})["validation_time"] = float(m.group(1))
        m = re.search(r"val_accuracy: ([0-9.e+-]+)", line)
        if m:
            out["epochs"].setdefault(epoch, {"steps": {}})["validation_accuracy"] = float(m.group(1))
        m = re.search(r"^Epoch time: ([0-9.e+-]+)", line)
        if m:
            out["epochs"].setdefault(epoch, {"steps": {}})["epoch_time"] = float(m.group(1))
        m = re.search(r"^Real time: ([0-9.e+-]+)", line)
        if m:
            t = float(m.group(1))
            first_real = t if first_real is None else first_real
            last_real = t
        m = re.search(r"^Tempo do fit: ([0-9.e+-]+)", line)
        if m:
            out["fit_time"] = float(m.group(1))
        m = re.search(r"^Tempo levado para o modelo ser salvo: ([0-9.e+-]+)", line)
        if m:
            out["write_model_time"] = float(m.group(1))
        m = re.search(r"^Duracao do treinamento: +([0-9.e+-]+)", line)
        if m:
            out["total_training"] = float(m.group(1))
        m = re.search(r"^ - Tamanho do batch: (\d+)", line)
        if m:
            out["batch_size"] = m.group(1)
    if first_real is not None and last_real is not None:
        out["largest_real_time_delta"] = last_real - first_real
    return out


if __name__ == "__main__":
    json.dump(parse_lines(sys.stdin), sys.stdout, indent=4)
