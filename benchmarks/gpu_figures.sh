#!/usr/bin/env bash
# The GPU figures the docs cite, in one run on a machine with an NVIDIA GPU (never part of CI):
#
#   benchmarks/gpu_figures.sh OUT_DIR [CORPUS_DIR]
#
# 1. nanoGPT under torchrun (the real-scripts corpus): instrumentation overhead in paired runs, by the
#    script's own step clock and by its training span; early stop against two full runs at batch sizes 16
#    and 32.
# 2. The DDP tutorial's mp.spawn form (multigpu.py): its ranks timed, early stop against two full runs.
# 3. The built-in ResNet-50 over dtype float32 / bfloat16 x 3 batch sizes, run as the planned job runs
#    (logs kept for `trainsweep import` and the report: samples/s, MFU, cost figures).
# Each part has its own time limit and writes OUT_DIR/<part>.txt (and .json / .tar.gz); a part that fails
# or runs out of time leaves the others' figures.
set -uo pipefail
out=${1:?usage: benchmarks/gpu_figures.sh OUT_DIR [CORPUS_DIR]}
corpus=${2:-../shared/fixtures/real-scripts}
cd "$(dirname "$0")/.."
mkdir -p "$out"
export PYTHONUNBUFFERED=1
py=${PYTHON:-python3}

part() {
  local name=$1 limit=$2
  shift 2
  echo "== $name (at most ${limit} s)"
  timeout "$limit" "$@" 2>&1 | grep -v '^:::MLLOG' | tee "$out/$name.txt"
  echo "== $name: exit ${PIPESTATUS[0]}"
}

{ date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; uptime; } \
  | tee "$out/machine.txt"
part nanogpt 300 "$py" benchmarks/bench_corpus.py --device cuda --corpus "$corpus" --scripts nanogpt \
  --pairs 4 --json "$out/nanogpt.json"
part ddp-spawn 90 "$py" benchmarks/bench_corpus.py --device cuda --corpus "$corpus" --scripts ddp-spawn \
  --parts early-stop --batch-sizes 64 --json "$out/ddp-spawn.json"
part resnet-dtype 170 "$py" benchmarks/gpu_axes.py --out "$out" --batch-sizes 256,512,1024 --epochs 2 --samples 25600
