"""Predicted vs published on Blackwell and AMD Instinct systems: collectives and training steps.

Nothing here is fitted: the rows are published end results that the hardware profiles do not
use (the collective rows are the ones the fabric profiles cite; they are shown to check that
the model reproduces what it was built from, and are marked "cited"). Training rows are NVIDIA's
Megatron-Bridge performance summaries (github.com/NVIDIA-NeMo/Megatron-Bridge,
docs/performance-summary-archive.md, tables "25.11 NeMo Container" and "26.04.01 NeMo
Container"): tokens/s/GPU of Llama 3 pretraining with the layout given there. Our scenario is
that layout with megatron-core defaults; recompute none, the distributed optimizer (ZeRO-1);
256 GPUs on NVL72 racks as four 64-GPU NVLink partitions (``cluster.scale_up_domain: 64``).

    python benchmarks/accuracy_hardware_2026.py
"""

from __future__ import annotations

import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's clustersim, not an installed one

from clustersim.api import simulate  # noqa: E402
from clustersim.collectives import GroupShape, plan_collective  # noqa: E402
from clustersim.hardware.load import load_cluster  # noqa: E402
from clustersim.scenario import load_scenario  # noqa: E402
from clustersim.uncertainty import step_interval  # noqa: E402
from validation.summary import summary  # noqa: E402

GiB = 2**30
# (system, GPUs, op, size, published busbw GB/s, source, cited by a profile?)
COLLECTIVES = [
    ("gb200-nvl72", 72, "all_reduce", 8 * GiB, 850.0, "NVIDIA GTC25 S72583 slide (via stas00/ml-engineering)", True),
    ("dgx-b200", 8, "all_reduce", 8 * GiB, 838.0, "stas00/ml-engineering network/README.md, nccl 2.27.7", True),
    ("gb200-nvl72", 8, "all_reduce", 8 * GiB, 811.0, "lixueduan.com GB200 MNNVL nccl-test, 2 trays", False),
    ("mi300x", 8, "all_reduce", 4 * GiB, 312.9, "stas00/ml-engineering network/README.md, all_reduce_bench", False),
    ("mi300x", 2, "all_reduce", 4 * GiB, 47.7, "stas00/ml-engineering network/README.md, all_reduce_bench", False),
]
MB_2511 = "Megatron-Bridge perf summary 25.11"
MB_2604 = "Megatron-Bridge perf summary 26.04.01"
# (label, preset, nodes, model, dtype, recipe, tp, pp, cp, vp, mbs, gbs, published tokens/s/GPU, source)
TRAINING = [
    ("Llama3 8B FP8-CS, 8x B200", "dgx-b200", 1, "llama3-8b", "fp8", "tensorwise", 1, 1, 1, 1, 2, 128, 30624, MB_2511),
    ("Llama3 8B MXFP8, 8x B200", "dgx-b200", 1, "llama3-8b", "fp8", "mxfp8", 1, 1, 1, 1, 2, 128, 29521, MB_2511),
    ("Llama3 8B FP8-CS, 8x GB200", "gb200-nvl72", 2, "llama3-8b", "fp8", "tensorwise", 1, 1, 1, 1, 2, 128, 31508,
     MB_2511),
    ("Llama3 8B FP8-CS, 8x GB300", "gb300-nvl72", 2, "llama3-8b", "fp8", "tensorwise", 1, 1, 1, 1, 2, 128, 37556,
     MB_2511),
    ("Llama3.1 405B FP8-CS, 128x B200", "dgx-b200", 16, "llama3-405b", "fp8", "tensorwise", 4, 8, 2, 8, 1, 64, 661,
     MB_2511),
    ("Llama3.1 405B FP8-CS, 256x GB200", "gb200-nvl72", 64, "llama3-405b", "fp8", "tensorwise", 4, 16, 1, 4, 1, 1536,
     813, MB_2511),
    ("Llama3 70B MXFP8, 64x GB200", "gb200-nvl72", 16, "llama3-70b", "fp8", "mxfp8", 2, 4, 1, 5, 1, 256, 3712, MB_2604),
    ("Llama3 70B NVFP4, 64x GB200", "gb200-nvl72", 16, "llama3-70b", "fp4", "nvfp4", 2, 4, 1, 5, 1, 256, 4864, MB_2604),
    ("Llama3 70B FP8-CS, 64x H100 (reference)", "dgx-h100", 8, "llama3-70b", "fp8", "tensorwise", 4, 8, 1, 5, 1, 128,
     1602, MB_2511),
]


def collective_rows() -> list[tuple[str, float, float, str]]:
    out = []
    for preset, gpus, op, size, published, source, cited in COLLECTIVES:
        cluster = load_cluster(preset, max(1, gpus // load_cluster(preset, 1).gpus_per_node))
        shape = GroupShape(min(gpus, cluster.gpus_per_domain), max(1, gpus // cluster.gpus_per_domain))
        plan = plan_collective(op, size, cluster, shape)
        label = f"{op} {gpus}x {preset} {size // GiB} GiB ({plan.algo})" + (" [cited]" if cited else "")
        out.append((label, published, plan.busbw_bytes_per_s / 1e9, source))
    return out


def training_rows() -> list[tuple[str, float, float, str]]:
    out = []
    for label, preset, nodes, model, dtype, recipe, tp, pp, cp, vp, mbs, gbs, published, source in TRAINING:
        gpus = nodes * load_cluster(preset, 1).gpus_per_node
        dp = gpus // (tp * pp * cp)
        sets = [f"cluster.preset={preset}", f"cluster.nodes={nodes}", f"model.preset={model}",
                f"training.dtype={dtype}", f"parallel.tp={tp}", f"parallel.pp={pp}", f"parallel.cp={cp}",
                f"parallel.dp={dp}", f"parallel.micro_batch={mbs}", f"parallel.global_batch={gbs}",
                f"parallel.sequence_parallel={'true' if tp > 1 else 'false'}", "parallel.zero_stage=1",
                "parallel.recompute=none",
                f"parallel.schedule={'interleaved-1f1b' if vp > 1 else '1f1b'}", f"parallel.virtual_stages={vp}"]
        sets.append(f"training.{'fp8' if dtype == 'fp8' else 'fp4'}_recipe={recipe}")
        domain = load_cluster(preset, 1).scale_up_domain
        if domain and gpus > domain and gpus % domain:
            # 256 GPUs on NVL72 racks run as 4 NVLink partitions of 64 (NVIDIA GB200 NVL partition guide)
            sets.append("cluster.scale_up_domain=64")
        scenario = load_scenario(None, sets)
        report = simulate(scenario)
        tokens = report.tokens_per_s / report.num_gpus
        # the 80% interval of the step time, as tokens/s per GPU: (lo, hi)
        interval = step_interval(scenario).of_rate(tokens)
        out.append((label, published, tokens, source, interval))
    return out


def main() -> None:
    for title, rows, unit in (("all_reduce bus bandwidth", collective_rows(), "GB/s"),
                              ("training throughput", training_rows(), "tokens/s/GPU")):
        table = Table(title=f"{title}: predicted vs published ({unit})")
        for col in ("case", "published", "predicted", "error", "source"):
            table.add_column(col, justify="left" if col in ("case", "source") else "right")
        errors, step_errors, inside, widths = [], [], [], []
        for label, published, predicted, source, *interval in rows:
            err = predicted / published - 1
            errors.append(err)
            if interval:   # a rate: the step-time error is published / predicted - 1 (negative: optimistic)
                lo, hi = interval[0]
                step_errors.append(published / predicted - 1)
                inside.append(lo <= published <= hi)
                widths.append((hi - lo) / predicted)
            table.add_row(label, f"{published:,.1f}", f"{predicted:,.1f}", f"{err:+.1%}", source)
        Console(width=170).print(table)
        if step_errors:
            print(f"{title}, step time: {summary(step_errors, inside, widths, 'cases')}\n")
        else:
            print(f"{title}: {summary(errors, label='cases')} (of the bandwidth)\n")


if __name__ == "__main__":
    main()
