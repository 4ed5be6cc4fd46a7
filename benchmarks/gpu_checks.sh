#!/usr/bin/env bash
# The accelerator checks of issue 14, in one script for a GPU machine (never part of CI):
#   1. the CUDA walk kernel against the token table      (mlx[cuda12]: stdsl.kernels.walk.check_walk_kernel("cuda"))
#   2. the pushdown device vector against PushdownRows   (mlx[cuda12]: stdsl.kernels.pushdown.device.check_pushdown_device)
#   3. the torch mask path on CUDA against the table      (torch CUDA: stdsl.kernels.torch_mask.check_torch_mask("cuda"))
#   4. the decode tests with MLX's default device on the GPU (tests/runtime)
#   5. the vLLM processor end to end on a GPU build of vLLM (tests/integrations/test_vllm.py, slow test included)
#   6. benchmarks/integrations.py on the GPU (stdsl beside xgrammar and guidance)
#   7. pushdown masks on the decode path from the device vector (issue 27 item 4): with MLX's default device
#      on the GPU, `auto` picks the device (so check 4 decodes under device masks too); device masks equal the
#      host rows' on every configuration to depth 4 (budgets too), and decoding under device masks is
#      token-identical to host masks (tests/kernels/pushdown/test_pushdown_device_masks.py,
#      tests/runtime/test_pushdown_device_decode.py)
# Each check that lacks its package is recorded as "skipped: <why>", never as passed.  The summary,
# with the device named, goes to benchmarks/results/gpu_checks.json (and to $OUT when set).
#
#   PYTHON=/path/to/venv/bin/python bash benchmarks/gpu_checks.sh
# DECODE_TESTS (pytest paths, default tests/runtime) and DECODE_SECONDS (default 600) size check 4 to a lease;
# CHECK_SECONDS_MAX caps every check's time limit.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python}"
RESULTS="benchmarks/results"
LOGS="${OUT:-/tmp}/gpu_checks_logs"
mkdir -p "$RESULTS" "$LOGS"
SUMMARY="$LOGS/summary.tsv"
: > "$SUMMARY"

has() { "$PYTHON" -c "import $1" >/dev/null 2>&1; }
mlx_cuda() { "$PYTHON" -c "import mlx.core as mx, sys; sys.exit(0 if mx.cuda.is_available() else 1)" >/dev/null 2>&1; }
torch_cuda() { "$PYTHON" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" >/dev/null 2>&1; }

check() {  # check NAME SECONDS COMMAND...: run one check with a time limit, record passed/failed
  local name="$1" limit="$2"; shift 2
  if [ -n "${CHECK_SECONDS_MAX:-}" ] && [ "$limit" -gt "$CHECK_SECONDS_MAX" ]; then limit="$CHECK_SECONDS_MAX"; fi
  local began=$SECONDS
  if timeout "$limit" "$@" > "$LOGS/$name.log" 2>&1; then
    printf '%s\tpassed\t%s\n' "$name" "$((SECONDS - began))s" >> "$SUMMARY"
  else
    printf '%s\tfailed (rc %s, see %s)\t%s\n' "$name" "$?" "$LOGS/$name.log" "$((SECONDS - began))s" >> "$SUMMARY"
  fi
  tail -3 "$LOGS/$name.log"
}
skip() { printf '%s\tskipped: %s\t0s\n' "$1" "$2" >> "$SUMMARY"; echo "skip $1: $2"; }

if has mlx.core && mlx_cuda; then
  check walk_kernel_cuda 300 "$PYTHON" -c "
import mlx.core as mx
mx.set_default_device(mx.gpu)
from stdsl.kernels.walk import backend, check_walk_kernel
assert backend() == 'cuda', backend()
for seed in range(3):
    check_walk_kernel('cuda', seed=seed)
print('walk kernel (cuda) equals the token table')"
  check pushdown_device_cuda 300 "$PYTHON" -c "
import mlx.core as mx
mx.set_default_device(mx.gpu)
from stdsl.kernels.pushdown.device import check_pushdown_device
print('pushdown device vector: tokens checked', check_pushdown_device())"
  # shellcheck disable=SC2086  # DECODE_TESTS is a list of pytest paths
  check decode_tests_gpu "${DECODE_SECONDS:-600}" "$PYTHON" -m pytest ${DECODE_TESTS:-tests/runtime} -p no:cacheprovider
  check pushdown_masks_auto_cuda 120 env -u STDSL_PUSHDOWN_MASKS "$PYTHON" -c "
from stdsl.kernels.pushdown.device_masks import mask_source
from stdsl.kernels.walk import backend
assert backend() == 'cuda' and mask_source() == 'device', (backend(), mask_source())
print('pushdown masks on the decode path come from the device vector by default on', backend())"
  check pushdown_device_masks_cuda 600 env -u STDSL_PUSHDOWN_MASKS "$PYTHON" -m pytest -p no:cacheprovider \
    tests/kernels/pushdown/test_pushdown_device_masks.py tests/runtime/test_pushdown_device_decode.py
else
  skip walk_kernel_cuda "mlx with the CUDA backend is not installed (pip install 'mlx[cuda12]')"
  skip pushdown_device_cuda "mlx with the CUDA backend is not installed"
  skip decode_tests_gpu "mlx with the CUDA backend is not installed"
  skip pushdown_masks_auto_cuda "mlx with the CUDA backend is not installed"
  skip pushdown_device_masks_cuda "mlx with the CUDA backend is not installed"
fi

if has torch && torch_cuda; then
  check torch_mask_cuda 300 "$PYTHON" -c "
from stdsl.kernels.torch_mask import check_torch_mask
print('torch mask on cuda: rows checked', check_torch_mask('cuda'))
for seed in range(1, 4):
    check_torch_mask('cuda', seed=seed)"
else
  skip torch_mask_cuda "torch with CUDA is not installed"
fi

if has vllm && torch_cuda; then
  check vllm_processor_gpu 600 "$PYTHON" -m pytest tests/integrations/test_vllm.py -p no:cacheprovider -m "slow or not slow"
  check integrations_benchmark_gpu 900 "$PYTHON" benchmarks/integrations.py --out "$RESULTS/integrations_gpu"
else
  skip vllm_processor_gpu "a CUDA build of vLLM is not installed"
  skip integrations_benchmark_gpu "a CUDA build of vLLM is not installed"
fi

"$PYTHON" - "$SUMMARY" "$RESULTS/gpu_checks.json" <<'EOF'
import json, subprocess, sys
rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1]) if line.strip()]
try:
    device = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                            capture_output=True, text=True, timeout=30).stdout.strip() or "no nvidia-smi output"
except (OSError, subprocess.SubprocessError) as error:
    device = f"nvidia-smi unavailable: {error}"
report = {"device": device, "checks": [{"check": n, "result": r, "seconds": s} for n, r, s in rows]}
json.dump(report, open(sys.argv[2], "w"), indent=1)
print(json.dumps(report, indent=1))
EOF
if [ -n "${OUT:-}" ]; then cp "$RESULTS/gpu_checks.json" "$OUT/" 2>/dev/null; cp "$RESULTS"/integrations_gpu.* "$OUT/" 2>/dev/null; fi
! grep -q "	failed" "$SUMMARY"
