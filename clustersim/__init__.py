"""clustersim: predict how a distributed training job runs on a GPU cluster."""

__version__ = "0.1.0"
