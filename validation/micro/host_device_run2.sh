# Megatron-Core layer host time with CUDA, repeated (three rounds each), on a GPU machine's CPU
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
export PYTHONUNBUFFERED=1
L=benchmarks/host_megatron_layer.py
run() { echo "== $*" | tee -a $OUT/host2.jsonl; timeout 60 python3 $L "$@" 2>$OUT/err_last.txt | tail -1 | tee -a $OUT/host2.jsonl; }
T="--tokens 4 --iters 30 --repeats 5"
for r in 1 2 3; do
  run --kind dense $T --cuda --bf16
  run --kind moe --grouped --experts 16 --topk 8 $T --cuda --bf16
  run --kind moe --grouped --experts 128 --topk 8 --force_lb $T --cuda --bf16
  run --kind dense $T
done
