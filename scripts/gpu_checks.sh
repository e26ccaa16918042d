#!/usr/bin/env bash
# Every GPU check of this project in one run, for a machine with a CUDA GPU: inside the image
# (`docker run --gpus all -v "$PWD:/src" -w /src IMAGE scripts/gpu_checks.sh`) or in a checkout
# whose python3 has the pinned stack. Results go to $OUT (or ./gpu-results); docs/gpu-results.md
# says how to read them and where to record them. Each step runs even if an earlier one failed;
# the exit code is the number of failed steps.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
out=${OUT:-gpu-results}
mkdir -p "$out"
export PYTHONPATH="$PWD/scripts${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 FTENV_REPORT=0
failed=0
step() {  # step NAME COMMAND...: run it, keep its output, say how it ended
    local name=$1
    shift
    local start=$SECONDS
    "$@" >"$out/$name.txt" 2>&1
    local rc=$?
    echo "$name: exit $rc in $((SECONDS - start)) s" | tee -a "$out/summary.txt"
    [ "$rc" -eq 0 ] || failed=$((failed + 1))
}

step environment sh -c 'nvidia-smi; python3 -c "import torch, transformers; print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version(), transformers.__version__)"; python3 -m pip show funasr 2>/dev/null | head -2'
step report-1 env TORCH_CUDNN_SDPA_DEPRIORITIZED=1 python3 -m ftenv.cli report --stdout
step report-0 env TORCH_CUDNN_SDPA_DEPRIORITIZED=0 python3 -m ftenv.cli report --stdout
step report-overhead python3 benchmarks/report_overhead.py --inside --rounds 5
step pytest-gpu python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_report_gpu.py tests/test_selfcheck.py
step gpu-check python3 scripts/gpu_check.py --recipe
step selfcheck-compile python3 -m ftenv.cli selfcheck --compile --device cuda
step compile-speedup python3 benchmarks/compile_speedup.py --json "$out/compile_speedup.json"
exit "$failed"
