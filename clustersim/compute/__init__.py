"""Compute model: per-op FLOPs, bytes and time of a transformer layer, the embedding, the output
head and the optimizer step (pure, cached). See docs/compute.md."""

from clustersim.compute.flops import model_flops_per_step
from clustersim.compute.gemm import gemm_efficiency, gemm_op
from clustersim.compute.heads import embedding_cost, output_cost
from clustersim.compute.layer import expert_params_per_gpu, layer_params_per_gpu, transformer_layer_cost
from clustersim.compute.ops import CommOp, LayerCost, Op, PassCost
from clustersim.compute.optimizer import optimizer_step_time_s

__all__ = [
    "CommOp", "LayerCost", "Op", "PassCost", "embedding_cost", "gemm_efficiency", "gemm_op",
    "expert_params_per_gpu", "layer_params_per_gpu", "model_flops_per_step", "optimizer_step_time_s", "output_cost",
    "transformer_layer_cost",
]
