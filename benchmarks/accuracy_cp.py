"""Predicted vs published step times of context-parallel runs (validation/reference/cp_published.yaml).

Validation only: nothing is fitted to these runs and they do not feed the prediction interval.
Same table as benchmarks/accuracy_moe.py (run, source, layout, measured, predicted, error,
interval, inside), for the runs that use context parallelism, at 8K and at 131K tokens.

    python benchmarks/accuracy_cp.py [--only ID ...] [--json]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's clustersim and validation/

from accuracy_moe import main  # noqa: E402

from validation.published_steps import CP_FILE  # noqa: E402

if __name__ == "__main__":
    main(CP_FILE, __doc__, "Context-parallel")
