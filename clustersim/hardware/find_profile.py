"""Where a calibrated cluster preset that is not loaded may be: the files `clustersim calibrate`
(``--out``, default ``NAME.yaml`` in the working directory) and `clustersim validate`
(``validation/measurements/MODE/calibrated-MODE.yaml``, or under ``CLUSTERSIM_VALIDATION_DIR``)
write by default. Used by the error for an unknown ``cluster.preset`` to name ``--profile FILE``."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

MAX_PROFILE_BYTES = 4 * 2**20   # a calibrated profile is a few kB; larger files are not read for a hint


def _candidates(name: str) -> list[Path]:
    validation = Path(os.environ.get("CLUSTERSIM_VALIDATION_DIR", "validation/measurements"))
    out = [Path(f"{name}.yaml"), Path(f"{name}.yml")]
    out += [validation / mode / f"{name}.yaml" for mode in ("netns", "loopback", "gpus")]
    return out


def _has_cluster(path: Path, name: str) -> bool:
    try:
        if not path.is_file() or path.stat().st_size > MAX_PROFILE_BYTES:
            return False
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return False
    clusters = data.get("clusters") if isinstance(data, dict) else None
    return isinstance(clusters, dict) and name in clusters


def calibrated_profile_for(name: str) -> Path | None:
    """The first default output file that defines cluster preset ``name`` (None if none does)."""
    if not isinstance(name, str) or not name or "/" in name or os.sep in name:
        return None
    return next((p for p in _candidates(name) if _has_cluster(p, name)), None)


def missing_cluster_hint(name: object) -> str:
    """What to add to the list of presets when ``cluster.preset`` is not one of them."""
    found = calibrated_profile_for(name) if isinstance(name, str) else None
    if found is not None:
        return (f"; {name} is a calibrated cluster defined in {found}: pass --profile {found} "
                "(or list the file in CLUSTERSIM_PROFILES)")
    return "; a calibrated cluster (clustersim calibrate --name NAME) needs --profile FILE, the profile it wrote"
