"""Per-rank simulation: faults within a step (slow GPUs, slow links, stragglers) and mixed GPUs.

``faults``: the scenario's ``faults:`` section; ``classes``: which data-parallel replicas run
alike (the symmetry that keeps 16,384 GPUs from meaning 16,384 simulated processes); ``run``: the
engines in per-rank mode, with the rank that paced the step and what it cost.
"""
