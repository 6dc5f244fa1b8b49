"""Benchmarks that the validation harness runs for real through torch.distributed (one process per rank)."""
