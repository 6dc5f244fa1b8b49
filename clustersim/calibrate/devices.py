"""The GPU a calibration's measurements name, against the cluster they are fitted to."""

from __future__ import annotations

from clustersim.errors import InputError
from clustersim.hardware.load import load_cluster
from clustersim.hardware.spec import ClusterSpec
from clustersim.importers.common import gpu_cluster_in


def check_devices(cluster: ClusterSpec, devices: list[tuple[str, str]], option: str) -> None:
    """Refuse measurements of another GPU than the cluster's: an H200's nccl-tests log fitted to
    dgx-h100 wrote an "H100" profile with H200 numbers (exit 0). A GPU name the importers do not
    know is let through; GPUs are told apart by what the part is (dense BF16 peak and memory), so
    a profile's own or calibrated copy of the part (``h100-sxm-80gb-mine``) counts as the part."""
    from clustersim.hardware.load import load_gpu
    mine = (cluster.gpu.peak("bf16"), cluster.gpu.hbm_capacity_bytes)
    for source, device in devices:
        found = gpu_cluster_in(device) if device else None
        if found is None:
            continue
        part = load_gpu(found["gpu"]) if "gpu" in found else load_cluster(found["preset"], 1).gpu
        gpu = part.name
        if (part.peak("bf16"), part.hbm_capacity_bytes) != mine:
            raise InputError("--cluster", cluster.name, f"the cluster the measurements ran on: {option} {source} "
                             f"ran on {device!r} ({gpu}), {cluster.name} has {cluster.gpu.name} "
                             f"(e.g. --cluster {found['preset']}, or leave --cluster out)")
