"""Predicted vs published step times of A100 runs with padded or uneven pipeline stages
(validation/reference/pipeline_published.yaml).

Validation only: nothing is fitted to these runs and they do not feed the prediction interval.
Same table as benchmarks/accuracy_moe.py (run, source, layout, measured, predicted, signed error,
80% interval, inside). Every row's pipeline split is the framework's own (docs/parallel.md,
"Layers per stage as the frameworks split them").

    python benchmarks/accuracy_pipeline.py [--only ID ...] [--json]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's clustersim and validation/

from accuracy_moe import main  # noqa: E402

from validation.published_steps import ROOT  # noqa: E402

PIPELINE_FILE = ROOT / "validation" / "reference" / "pipeline_published.yaml"

if __name__ == "__main__":
    main(PIPELINE_FILE, __doc__, "Padded or uneven pipeline")
