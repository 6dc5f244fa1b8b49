"""Profiler traces: the kernel classifier (GPU and CPU names), planted constants found again,
traces without kernels refused."""

import json

import pytest

from clustersim.calibrate.trace_fit import fit_traces
from clustersim.calibrate.trace_kernels import classify_cpu, classify_gpu, parse_trace, read_trace
from clustersim.cli import main
from clustersim.errors import InputError
from clustersim.hardware.load import load_cluster
from tests.validation.kineto import FLASH_BWD, FLASH_FWD, GEMM_KERNELS, NCCL_AR, gpu_trace, write


def _run(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


@pytest.mark.parametrize("name, expected", [
    *((k, "gemm") for k in GEMM_KERNELS),
    ("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_tn", "gemm"),
    ("triton_tem_fused_mm_3", "gemm"),
    (FLASH_FWD, "attention_fwd"), (FLASH_BWD, "attention_bwd"),
    ("cudnn_generated_fort_native_sdpa_sm90_knob_7_64x128x128_4x1x1_kernel0_0", "attention_fwd"),
    ("void transformer_engine::rmsnorm_fwd_tuned_kernel<...>", "elementwise"),
    ("triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0", "elementwise"),
    ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<...FusedAdamMathFunctor...>", "elementwise"),
    (NCCL_AR, "nccl"), ("ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclWorkElem)", "nccl"),
])
def test_gpu_kernel_names(name, expected):
    assert classify_gpu(name) == expected


def test_cpu_op_names():
    assert classify_cpu("aten::addmm") == "gemm" and classify_cpu("aten::native_layer_norm") == "elementwise"
    assert classify_cpu("aten::_scaled_dot_product_flash_attention_for_cpu") == "attention_fwd"
    assert classify_cpu("aten::linear") == "other"   # a wrapper: its addmm does the work


def test_planted_constants_are_found_again(tmp_path, capsys):
    cluster = load_cluster("dgx-h100", 1)
    path = tmp_path / "rank0.pt.trace.json"
    write(path, gpu_trace(gpu=cluster.gpu, gemm_scale=0.8, attention_scale=0.7, hbm_efficiency=0.6,
                          nccl_busbw_GBps=400))
    fit = fit_traces([read_trace(path)], cluster)
    assert fit.gpu_constants["gemm_scale"] == pytest.approx(0.8, rel=1e-3)
    assert fit.gpu_constants["attention_scale"] == pytest.approx(0.7, rel=1e-3)
    assert fit.gpu_constants["hbm_efficiency"] == pytest.approx(0.6, rel=1e-3)
    assert len(fit.comm_observations) == 4 and {o.op for o in fit.comm_observations} == {"all_reduce"}
    out = tmp_path / "p.yaml"
    code, stdout, _ = _run(["calibrate", "--trace", str(path), "--out", str(out), "--json"], capsys)
    assert code == 0 and json.loads(stdout)["base_cluster"] == "dgx-h100"  # from deviceProperties
    # the fitted factors are reported without runs too (a trace-only calibration printed nothing)
    factors = {f["name"]: f["value"] for f in json.loads(stdout)["factors"]}
    assert factors["gemm_scale"] == pytest.approx(0.8, rel=1e-3) and "scale_up.bw" in factors
    code, stdout, _ = _run(["calibrate", "--trace", str(path), "--out", str(tmp_path / "q.yaml")], capsys)
    assert code == 0 and "fitted factors:" in stdout and "gemm_scale: 1 -> 0.8" in stdout
    from clustersim.calibrate.profile import profile_in_env
    with profile_in_env(out):
        gpu = load_cluster("calibrated", 1).gpu
    assert gpu.gemm_scale == pytest.approx(0.8, rel=1e-3) and gpu.hbm_efficiency == pytest.approx(0.6, rel=1e-3)


def test_cpu_trace_from_the_pytorch_profiler(tmp_path):
    """A real Kineto trace, recorded here on the CPU: operators, not kernels."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile
    torch.manual_seed(0)
    lin = torch.nn.Sequential(torch.nn.LayerNorm(64), torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 64))
    x = torch.randn(8, 32, 64)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(2):
            q = x.view(8, 32, 4, 16).transpose(1, 2)
            a = torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
            lin(a.transpose(1, 2).reshape(8, 32, 64)).sum().backward()
    path = tmp_path / "cpu.json"
    prof.export_chrome_trace(str(path))
    trace = read_trace(path)
    cats = {k: len(v) for k, v in trace.by_category().items()}
    assert trace.device == "cpu" and cats["gemm"] >= 2 * 3 and cats["attention_fwd"] == 2 and cats["elementwise"] > 0
    fit = fit_traces([trace], load_cluster("dgx-h100", 1))
    assert 0 < fit.gpu_constants["gemm_scale"] < 1    # a CPU is slower than an H100's model
    assert any("CPU" in n for n in fit.notes)


@pytest.mark.parametrize("data", [{"traceEvents": []}, {"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::view",
                                                                          "ts": 1, "dur": 2}]}, {"other": 1}])
def test_trace_without_kernels_is_refused(data):
    with pytest.raises(InputError):
        parse_trace(data, "t.json")


def test_trace_cli_bad_input_writes_nothing(tmp_path, capsys):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": [{"ph": "M", "name": "process_name"}]}))
    out = tmp_path / "never.yaml"
    code, _, err = _run(["calibrate", "--trace", str(path), "--cluster", "dgx-h100", "--out", str(out)], capsys)
    assert code == 2 and "kernel" in err and not out.exists()


def test_kernels_without_work_are_counted_not_fitted(tmp_path, capsys):
    """An MoE expert given no tokens launches `aten::mm` with Input Dims [[0, K], [K, N]] (and an
    attention of batch 0 does no work either): the fit ended in ZeroDivisionError in the GEMM model's
    tile quantization; such kernels are now skipped as kernels without shapes are, and reported."""
    cluster = load_cluster("dgx-h100", 1)
    data = gpu_trace(gpu=cluster.gpu, gemm_scale=0.8, attention_scale=0.7, hbm_efficiency=0.6, nccl_busbw_GBps=400)
    bf = "c10::BFloat16"
    for ext, (op, dims, kernel) in enumerate((("aten::mm", [[0, 4096], [4096, 12288]], GEMM_KERNELS[0]),
                                              ("aten::_scaled_dot_product_flash_attention",
                                               [[0, 32, 8192, 128]] * 3, FLASH_FWD)), start=900):
        data["traceEvents"] += [
            {"ph": "X", "cat": "cpu_op", "name": op, "pid": 1, "tid": 1, "ts": 5e6 + ext * 100, "dur": 8.0,
             "args": {"External id": ext, "Input Dims": dims, "Input type": [bf] * len(dims),
                      "Concrete Inputs": [""] * len(dims), "Sequence number": ext}},
            {"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 7, "ts": 5e6 + ext * 100 + 20, "dur": 5.0,
             "args": {"External id": ext, "device": 0, "stream": 7, "correlation": 9000 + ext}}]
    path = tmp_path / "moe.json"
    write(path, data)
    fit = fit_traces([read_trace(path)], cluster)
    assert fit.gpu_constants["gemm_scale"] == pytest.approx(0.8, rel=1e-3)
    assert fit.gpu_constants["attention_scale"] == pytest.approx(0.7, rel=1e-3)
    assert any("1 gemm kernels with a dimension of 0" in n for n in fit.notes), fit.notes
    assert any("1 attention_fwd kernels with a dimension of 0" in n for n in fit.notes), fit.notes
    code, stdout, err = _run(["calibrate", "--trace", str(path), "--out", str(tmp_path / "p.yaml"), "--json"], capsys)
    assert code == 0, err
    assert json.loads(stdout)["gpu"]["gemm_scale"] == pytest.approx(0.8, rel=1e-3)


def test_a_trace_with_nothing_fittable_is_refused(tmp_path, capsys):
    """A trace whose only kernel has no shape (record_shapes off) fitted nothing, yet wrote a profile
    identical to the preset and exited 0, as if calibrated."""
    data = {"traceEvents": [{"ph": "X", "cat": "kernel", "name": GEMM_KERNELS[0], "pid": 0, "tid": 7, "ts": 10.0,
                             "dur": 5.0, "args": {"device": 0, "stream": 7, "correlation": 1}}]}
    path = tmp_path / "noshape.json"
    write(path, data)
    out = tmp_path / "never.yaml"
    code, _, err = _run(["calibrate", "--trace", str(path), "--cluster", "dgx-h100", "--out", str(out)], capsys)
    assert code == 2 and "nothing was fitted" in err and "record_shapes" in err, err
    assert not out.exists()
