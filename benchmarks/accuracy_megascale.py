"""Predicted vs published step times of MegaScale's Megatron-LM baseline, a 175B GPT on 256-12,288
A100 GPUs at a fixed batch and a 530B GPT on 2,240-11,200 (validation/reference/megascale_published.yaml).

Validation only: nothing is fitted to these runs and they do not feed the prediction interval.
Same table as benchmarks/accuracy_moe.py (run, source, layout, measured, predicted, signed error,
80% interval, inside). MegaScale's own rows are listed as not simulated, with the reason.

    python benchmarks/accuracy_megascale.py [--only ID ...] [--json]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's clustersim and validation/

from accuracy_moe import main  # noqa: E402

from validation.published_steps import ROOT  # noqa: E402

MEGASCALE_FILE = ROOT / "validation" / "reference" / "megascale_published.yaml"

if __name__ == "__main__":
    main(MEGASCALE_FILE, __doc__, "MegaScale's Megatron-LM baseline")
