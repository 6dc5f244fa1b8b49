set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv | tee $OUT/smi.txt
lscpu | grep -E "Model name|^CPU\(s\)" | tee $OUT/cpu.txt
timeout 200 python3 validation/micro/moe_kernels_gpu.py --out $OUT/moe_kernels.json 2>&1 | tee $OUT/moe_kernels.txt
L=benchmarks/host_megatron_layer.py
run() { echo "== $*" | tee -a $OUT/megatron_gpu.jsonl; timeout 90 python3 $L --cuda --bf16 "$@" 2>$OUT/err_last.txt | tail -1 | tee -a $OUT/megatron_gpu.jsonl; tail -3 $OUT/err_last.txt; }
run --kind dense --tokens 4 --iters 30 --repeats 5
run --kind moe --grouped --experts 16 --topk 8 --tokens 4 --iters 30 --repeats 5
run --kind moe --grouped --experts 128 --topk 8 --tokens 4 --iters 30 --repeats 5 --force_lb
run --kind moe --grouped --hidden 2048 --heads 32 --kv 4 --head_dim 128 --ffn 6144 --moe_ffn 768 --experts 8 --topk 8 --tokens 4096 --iters 10 --repeats 3
run --kind moe --grouped --hidden 2048 --heads 32 --kv 4 --head_dim 128 --ffn 6144 --moe_ffn 768 --experts 128 --topk 8 --tokens 4096 --iters 10 --repeats 3 --force_lb
run --kind dense --hidden 2048 --heads 16 --kv 16 --head_dim 128 --ffn 8192 --tokens 4096 --iters 10 --repeats 3
run --kind moe_only --grouped --hidden 2048 --heads 32 --kv 4 --head_dim 128 --moe_ffn 768 --experts 8 --topk 8 --tokens 4096 --iters 10 --repeats 3
echo "== cpu host (host_megatron.py, no GPU)" | tee $OUT/host_cpu.txt
timeout 150 python3 benchmarks/host_megatron.py --rounds 3 2>&1 | tee -a $OUT/host_cpu.txt
