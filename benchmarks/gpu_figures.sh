#!/usr/bin/env bash
# The GPU figures the docs cite, in one run on a machine with an NVIDIA GPU (never part of CI):
#
#   [PARTS="mfu class-logs nanogpt-32"] benchmarks/gpu_figures.sh OUT_DIR [CORPUS_DIR]
#
# PARTS (default: all, in this order) picks and orders the parts:
# - nanogpt: nanoGPT under torchrun (the real-scripts corpus): instrumentation overhead in paired runs, by the
#    script's own step clock and by its training span; early stop against two full runs at batch sizes 16
#    and 32 (nanogpt-32: early stop at batch size 32 alone).
# - ddp-spawn: the DDP tutorial's mp.spawn form (multigpu.py): its ranks timed, early stop against two full runs.
# - resnet-dtype: the built-in ResNet-50 over dtype float32 / bfloat16 x 3 batch sizes, run as the planned
#   job runs (logs kept for `trainsweep import` and the report: samples/s, MFU, cost figures).
# - mfu: the same planned job, 60 steps a cell, each cell's report MFU against the hand calculation.
# - class-logs: container_logs.py --gpu for mnist-cnn and resnet50-cifar10, the early-stop interval's
#   calibration data of this GPU's instance class.
# The logs the parts keep are packed into OUT_DIR/logs.tar.gz at the end.
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
parts=${PARTS:-nanogpt ddp-spawn resnet-dtype mfu class-logs}
for p in $parts; do
  case $p in
  nanogpt) part nanogpt 300 "$py" benchmarks/bench_corpus.py --device cuda --corpus "$corpus" --scripts nanogpt \
    --pairs 4 --json "$out/nanogpt.json" ;;
  nanogpt-32) part nanogpt-32 120 "$py" benchmarks/bench_corpus.py --device cuda --corpus "$corpus" \
    --scripts nanogpt --parts early-stop --batch-sizes 32 --json "$out/nanogpt-32.json" ;;
  ddp-spawn) part ddp-spawn 90 "$py" benchmarks/bench_corpus.py --device cuda --corpus "$corpus" \
    --scripts ddp-spawn --parts early-stop --batch-sizes 64 --json "$out/ddp-spawn.json" ;;
  resnet-dtype) part resnet-dtype 170 "$py" benchmarks/gpu_axes.py --out "$out" --batch-sizes 256,512,1024 \
    --epochs 2 --samples 25600 ;;
  mfu) part mfu 200 "$py" benchmarks/mfu_resnet50.py --run --steps 60 --out "$out/mfu-job" ;;
  class-logs)
    part class-logs-mnist 80 "$py" benchmarks/container_logs.py --gpu --workload mnist-cnn --sessions a,b,c \
      --samples 6400 --out "$out/container-logs-gpu"
    part class-logs-resnet 120 "$py" benchmarks/container_logs.py --gpu --workload resnet50-cifar10 \
      --sessions a,b,c --samples 3200 --out "$out/container-logs-gpu" ;;
  *) echo "unknown part: $p" >&2 ;;
  esac
done
# The logs kept above, in one file (what comes back from a lease is a few files, two folders deep).
(cd "$out" && find . -mindepth 2 -type f \( -name '*.log' -o -name 'job-output.txt' \) -print0 |
  tar --null -czf logs.tar.gz --files-from=- && find . -mindepth 1 -type d -exec rm -rf {} +) 2>/dev/null
ls -la "$out"
