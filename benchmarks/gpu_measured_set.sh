#!/bin/bash
# The microbenchmark's GPU sets, taken within a fixed time on the CUDA device of this machine:
# the kernel sweep (`--preset calibrate`) and the attention layers (`--preset full`), each bounded
# by --max-minutes (points not reached are skipped rows that say so), with the device's
# description beside them. On the H200 lease it took benchmarks/results' calibrate set; the
# committed full set was taken by its second command alone, rerun after fixes
# (docs/microbenchmark.md).
#
#   bash benchmarks/gpu_measured_set.sh OUT_DIR [CALIBRATE_MINUTES] [FULL_MINUTES]
#
# Runs from the repository root without installing the package (PYTHONPATH), with the python3
# that holds a CUDA build of PyTorch.
set -u
out=${1:?usage: gpu_measured_set.sh OUT_DIR [CALIBRATE_MINUTES] [FULL_MINUTES]}
cal=${2:-2}
full=${3:-4.5}
mkdir -p "$out"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
env_file="$out/environment.txt"
{
    echo "# taken $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit,clocks.max.sm,clocks.max.mem \
        --format=csv 2>&1
    python3 -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__,
        "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())' 2>&1
} >"$env_file"
status=0
python3 -m mlacalc bench --preset calibrate --device cuda --out "$out" --max-minutes "$cal" \
    --no-progress || status=1
python3 -m mlacalc bench --preset full --device cuda --out "$out" --max-minutes "$full" \
    --no-progress || status=1
{
    echo "# after the runs"
    nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv 2>&1
} >>"$env_file"
exit $status
