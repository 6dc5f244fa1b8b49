"""Memory model: per-GPU weights, gradients, optimizer states, activations, buffers, allocator
(pure, cached). See docs/memory.md."""

from clustersim.memory.activations import layer_activation_bytes
from clustersim.memory.report import MemoryReport, memory_report, stage_params
from clustersim.memory.saved import Kernels, layer_saved

__all__ = ["Kernels", "MemoryReport", "layer_activation_bytes", "layer_saved", "memory_report", "stage_params"]
