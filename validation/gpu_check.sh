#!/usr/bin/env bash
# The harness on a GPU machine: `clustersim validate --backend nccl` (collectives, GEMMs and the
# small GPT's DDP / ZeRO-1 / FSDP2 / TP / PP steps, each rank on its own GPU) and the memory check
# of its steps (validation/gpu_memory.py), written where docs/validation.md reads them:
#
#   docs/validation/gpus-quick.json          validate --json (cases, fits, fit check, summary)
#   docs/validation/gpus-memory.json         measured vs predicted step memory
#   docs/validation/calibrated-gpus.yaml     the profile the run wrote
#   docs/validation/gpus-quick.png           predicted vs measured
#   docs/validation/gpus-env.txt             nvidia-smi, torch and NCCL versions
#
# Usage (from the repository root, torch with CUDA installed, one GPU per rank):
#   bash validation/gpu_check.sh [NPROCS] [LEVEL]        # defaults: all visible GPUs (at most 8), quick
# It needs a few minutes on one GPU and at least two GPUs (ranks); exit 1 if validate fails, which
# includes a profile that misses its own fit points (--ci only) or no GPU (exit 2, said why).
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
GPUS=$(python -c "import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)")
if [ "$GPUS" -lt 2 ]; then
  echo "gpu_check: needs at least 2 CUDA GPUs (torch sees $GPUS); run it on a GPU machine" >&2
  exit 2
fi
NPROCS=${1:-$(( GPUS > 8 ? 8 : GPUS ))}
LEVEL=${2:-quick}
OUT=${CLUSTERSIM_GPU_CHECK_DIR:-validation/measurements/gpus}
DOCS=docs/validation
mkdir -p "$DOCS"
{ nvidia-smi || true; python -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'nccl', torch.cuda.nccl.version() if torch.cuda.is_available() else None)"; } > "$DOCS/gpus-env.txt" 2>&1
python -m clustersim validate --backend nccl --nprocs "$NPROCS" "--$LEVEL" --out "$OUT" --json > "$DOCS/gpus-$LEVEL.json"
python -m validation.gpu_memory "$OUT" --json > "$DOCS/gpus-memory.json"
cp "$OUT/calibrated-gpus.yaml" "$DOCS/calibrated-gpus.yaml"
cp "$OUT/validation-loopback.png" "$DOCS/gpus-$LEVEL.png" 2>/dev/null || true
python - "$DOCS/gpus-$LEVEL.json" "$DOCS/gpus-memory.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
s = doc["summary"]
print(f"held-out: {s['holdout']['cases']} cases, median |error| {s['holdout']['median_abs_error_pct']}%")
print(f"fit points: {s['fit_points']['cases']} cases, median |error| {s['fit_points']['median_abs_error_pct']}%")
print("fit check:", "ok" if doc["fit_check"]["ok"] else "FAILED", doc["fit_check"]["constants"].keys())
for row in json.load(open(sys.argv[2])):
    print(f"{row['case']}: allocated {row['allocated_error_pct']:+.1f}%, reserved {row['reserved_error_pct']:+.1f}%")
PY
