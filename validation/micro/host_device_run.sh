# Host time of Megatron-Core layers on a GPU machine's CPU, with and without CUDA
# (the host-time measurement of validation/micro/README.md, h200_megatron_host_2026-11-28.txt; docs/engine.md)
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
export PYTHONUNBUFFERED=1
python3 - <<'PY' 2>&1 | tee $OUT/launch.txt
import time, torch, torch.nn.functional as F
def per_call(fn, n=20000):
    for _ in range(200): fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n): fn()
    s = time.perf_counter() - t
    torch.cuda.synchronize()
    return s / n * 1e6
for dev in ("cpu", "cuda"):
    x = torch.ones(4, device=dev)
    w = torch.randn(8, 8, device=dev, requires_grad=True); a = torch.randn(4, 8, device=dev)
    print(dev, "add_us %.2f" % per_call(lambda: torch.add(x, 1)), "linear_autograd_us %.2f" % per_call(lambda: F.linear(a, w)))
PY
L=benchmarks/host_megatron_layer.py
run() { echo "== $*" | tee -a $OUT/host.jsonl; timeout 80 python3 $L "$@" 2>$OUT/err_last.txt | tail -1 | tee -a $OUT/host.jsonl; tail -2 $OUT/err_last.txt; }
T="--tokens 4 --iters 30 --repeats 5"
run --kind dense $T
run --kind moe --experts 16 --topk 8 $T
run --kind dense $T --cuda
run --kind moe --experts 16 --topk 8 $T --cuda
run --kind moe --grouped --experts 16 --topk 8 $T --cuda
run --kind dense $T --cuda --bf16
run --kind moe --experts 16 --topk 8 $T --cuda --bf16
