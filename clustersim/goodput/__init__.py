"""A whole training run with failures, checkpoints and restarts: goodput (docs/goodput.md).

rates.py (what fails how often), config.py (the scenario's ``goodput:`` section),
checkpoint.py (checkpoint size and times), expectation.py (exact long-run expectation, optimal
interval, Young/Daly), montecarlo.py (seeded runs), report.py (GoodputReport). Import from the
submodules: clustersim.scenario imports config.py, so this package imports nothing itself.
"""
