"""Where a MoE layer's tokens go: load of the busiest expert rank and the spread of a token's experts.

* **Load** (``load_factor``): the busiest expert-parallel rank processes ``imbalance`` times the
  average number of token-expert pairs (it sets the pace of the grouped GEMMs and of the
  all-to-all, whose time is that of its most loaded receiver). A capacity factor ``c`` caps
  every expert at ``c`` times its average load (GShard, Lepikhin et al. 2020, arXiv 2006.16668
  §2.2; Megatron ``--moe-expert-capacity-factor``), so the busiest rank sees ``min(imbalance, c)``;
  dropless MoE (no capacity factor) sees ``imbalance``. With the input padded to capacity
  (Megatron ``--moe-pad-expert-input-to-capacity``, megatron/core/transformer/moe/token_dispatcher.py:
  every expert's tokens padded up to its capacity before the all-to-all), every rank computes and
  exchanges exactly ``c`` times the mean load, however balanced the routing.
* **Spread** (``spread``): the expected number of distinct nodes and of distinct expert ranks
  that one token's ``top_k`` experts sit on. Experts are laid out in order (``E / ep`` per EP
  rank, ``E / nodes`` per node of the EP group). Without a group limit the ``k`` experts are
  taken as ``k`` draws without replacement from the ``E`` experts, so a given node holding
  ``E / N`` of them is missed with probability ``C(E - E/N, k) / C(E, k)`` (hypergeometric).
  Node-limited routing (DeepSeek-V3, arXiv 2412.19437 §2.1.2: experts in ``G`` groups, each
  token restricted to the ``M`` groups with the highest affinity, "at most 4 nodes"; Megatron
  ``--moe-router-num-groups`` / ``--moe-router-group-topk``) first picks ``M`` of the ``G``
  groups; we take every picked group to receive at least one of the token's experts (the
  groups are ranked by the sum of their top-2 expert scores, so with ``k >= M`` each picked
  group holds some of the top-``k``) and the groups as uniformly chosen, which gives the same
  hypergeometric form over groups. Balanced routing (the aim of the load-balancing losses and of
  DeepSeek's auxiliary-loss-free bias) is what makes a uniform draw the expected spread.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from math import comb

from clustersim.workload.model_spec import ModelSpec


def load_factor(model: ModelSpec) -> float:
    """Busiest expert rank's token-expert pairs over the average (see module docstring)."""
    if model.moe_capacity_factor > 0 and model.moe_pad_to_capacity:
        return model.moe_capacity_factor
    if model.moe_capacity_factor > 0:
        return min(model.moe_imbalance, model.moe_capacity_factor)
    return model.moe_imbalance


def _hit(total: int, per_bin: int, picks: int) -> float:
    """Expected number of bins (of ``per_bin`` items each, ``total`` items) hit by ``picks``
    draws without replacement."""
    bins = total // per_bin
    picks = min(picks, total)
    if bins <= 1:
        return float(bins)
    miss = comb(total - per_bin, picks) / comb(total, picks)
    return bins * (1.0 - miss)


@dataclass(frozen=True, slots=True)
class Spread:
    nodes: float   # distinct nodes of the EP group that one token's experts sit on
    ranks: float   # distinct EP ranks


@functools.lru_cache(maxsize=1024)
def spread(model: ModelSpec, ep: int, ep_nodes: int) -> Spread:
    """Expected distinct nodes and EP ranks per token for ``ep`` ranks on ``ep_nodes`` nodes."""
    e, k = model.moe_experts, model.moe_top_k
    ep_nodes = max(1, min(ep_nodes, ep))
    groups, m = model.moe_router_num_groups, model.moe_router_group_topk
    if groups and m and groups % ep_nodes == 0 and m < groups:
        # groups do not straddle nodes: a token touches the nodes of its min(M, k) groups
        nodes = _hit(groups, groups // ep_nodes, min(m, k))
        # ranks: k draws among the experts of the picked groups
        pool = min(m, k) * (e // groups)
        per_rank = e // ep
        ranks = _hit(pool, per_rank, k) if pool >= per_rank and pool % per_rank == 0 else min(float(k), pool)
    else:
        nodes = _hit(e, e // ep_nodes, k) if e % ep_nodes == 0 else min(float(k), ep_nodes)
        ranks = _hit(e, e // ep, k)
    return Spread(nodes=nodes, ranks=max(nodes, ranks))
