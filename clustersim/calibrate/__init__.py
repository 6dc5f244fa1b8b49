"""Calibration against real runs: the measurement record store, alpha-beta and compute fits,
the nccl-tests log parser, the calibrated-profile writer and the predicted-vs-measured comparison.

Nothing here imports torch: the benchmarks that produce the records live in ``validation/``
and run in their own processes.
"""
