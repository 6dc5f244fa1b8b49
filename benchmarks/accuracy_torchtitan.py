"""Predicted vs published step times of torchtitan's FSDP2 runs on 64 A100
(validation/reference/torchtitan_published.yaml: Llama 3 8B/70B and Llama 2 13B/70B, with
torchtitan's three activation-checkpointing modes).

Validation only: nothing is fitted to these runs and they do not feed the prediction interval.
Same table as benchmarks/accuracy_moe.py (run, source, layout, measured, predicted, signed error,
80% interval, inside).

    python benchmarks/accuracy_torchtitan.py [--only ID ...] [--json]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's clustersim and validation/

from accuracy_moe import main  # noqa: E402

from validation.published_steps import ROOT  # noqa: E402

TORCHTITAN_FILE = ROOT / "validation" / "reference" / "torchtitan_published.yaml"

if __name__ == "__main__":
    main(TORCHTITAN_FILE, __doc__, "torchtitan FSDP2 on 64 A100")
