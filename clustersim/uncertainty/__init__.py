"""How sure a prediction is: 80% intervals from the residuals of published runs (docs/uncertainty.md)."""

from clustersim.uncertainty.interval import LEVEL, Interval
from clustersim.uncertainty.regimes import Features, features
from clustersim.uncertainty.step import step_interval

__all__ = ["LEVEL", "Features", "Interval", "features", "step_interval"]
