"""One summary line for every accuracy table (benchmarks/accuracy*.py).

``error`` = predicted / measured - 1 (negative: the prediction is optimistic, too fast). The 80%
interval's width is (hi - lo) / predicted; coverage is the share of measured runs inside their
interval.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence


def summary(errors: Sequence[float], inside: Sequence[bool] = (), widths: Sequence[float] = (),
            label: str = "runs") -> str:
    """``N runs  mean signed  mean |error|  max |error|  80% coverage  median width``."""
    if not errors:
        return f"0 {label}"
    out = (f"{len(errors)} {label}  mean signed {statistics.fmean(errors):+.1%}  mean |error| "
           f"{statistics.fmean(map(abs, errors)):.1%}  max |error| {max(map(abs, errors)):.1%}")
    if inside:
        out += f"  80% coverage {sum(inside)}/{len(inside)} ({sum(inside) / len(inside):.0%})"
    if widths:
        out += f"  median width {statistics.median(widths):.1%}"
    return out
