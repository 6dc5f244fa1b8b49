"""Layout search and hardware comparison (`clustersim sweep`, `clustersim compare`); see docs/sweep.md.

space.py        every valid layout, with the symmetry rules and the constraints' limits
constraints.py  --fix, --max, --set on a searched dimension -> a narrowed SearchSpace
screen.py       exact memory and a step-time lower bound per layout, cheaply
evaluate.py     what a worker runs: screening tasks, closed form, event engine
evaluators.py   the closed form and the event engine, passed in from above (clustersim.api)
executors.py    serial, local process pool, Dask
runner.py       screen -> branch and bound with the closed form -> re-rank with the event engine
bnb.py          the branch and bound: the closed form on what can reach the best groups
objective.py    --rank-by, plain 3D layouts, groups of layouts that share a row
groups.py       the final ranking: group rows by the ranked value
result.py       SweepResult: the ranked table and its rows as --json prints them
verdict.py      what the ranking says, in words
rank.py         key codes and the Pareto front
output.py       atomic CSV/parquet; plot.py: plots; compare.py: time-to-train arithmetic

The sweep imports neither clustersim.html nor clustersim.cli: the notebook display of a
SweepResult is attached by clustersim.html.sweep_notebook (imported by clustersim.api.sweep). Nor does
it import clustersim.api: its callers pass the timing models in (evaluators.py).
"""
