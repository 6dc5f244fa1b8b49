"""Layout search and hardware comparison (`clustersim sweep`, `clustersim compare`); see docs/sweep.md.

space.py      every valid layout, with the symmetry rules
screen.py     exact memory and a step-time lower bound per layout, cheaply
evaluate.py   what a worker runs: screening tasks, closed form, event engine
executors.py  serial, local process pool, Dask
runner.py     screen -> branch and bound with the closed form -> re-rank with the event engine
rank.py       deterministic ranking and the Pareto front
output.py     atomic CSV/parquet; plot.py: plots; compare.py: time-to-train arithmetic
"""
