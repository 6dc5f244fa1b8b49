"""Hardware specs (frozen dataclasses) and the YAML profiles that define them."""

from clustersim.hardware.load import (
    list_clusters,
    list_fabrics,
    list_gpus,
    load_cluster,
    load_fabric,
    load_gpu,
)
from clustersim.hardware.spec import CalibrationEvidence, ClusterSpec, FabricSpec, GpuSpec

__all__ = [
    "CalibrationEvidence", "ClusterSpec", "FabricSpec", "GpuSpec",
    "list_clusters", "list_fabrics", "list_gpus", "load_cluster", "load_fabric", "load_gpu",
]
