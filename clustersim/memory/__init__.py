"""Memory model: per-GPU weights, gradients, optimizer states, activations, buffers (pure, cached).
See docs/compute.md, section "Memory"."""

from clustersim.memory.activations import layer_activation_bytes
from clustersim.memory.report import MemoryReport, memory_report, stage_params

__all__ = ["MemoryReport", "layer_activation_bytes", "memory_report", "stage_params"]
