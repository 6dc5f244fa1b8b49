"""Units, decided once for the whole project.

Inside clustersim every quantity is SI: seconds, bytes, bytes per second, FLOP per second.
Decimal prefixes are decimal (1 GB = 1e9 bytes, 1 GB/s = 1e9 B/s, as datasheets and nccl-tests
use them); binary prefixes are binary (1 GiB = 2**30 bytes). Profiles and scenarios carry the
unit in each key (``bw_GBps``, ``latency_us``, ``capacity_GiB``) and are converted here only.
"""

from __future__ import annotations

import re

KB = 1e3
MB = 1e6
GB = 1e9
TB = 1e12
KiB = 2**10
MiB = 2**20
GiB = 2**30
TiB = 2**40

US = 1e-6
NS = 1e-9
MS = 1e-3

TFLOPS = 1e12
GBIT = 1e9 / 8  # bytes per second in one Gbit/s

_SIZE_SUFFIX = {
    "": 1, "B": 1,
    "K": KiB, "KB": KB, "KIB": KiB,
    "M": MiB, "MB": MB, "MIB": MiB,
    "G": GiB, "GB": GB, "GIB": GiB,
    "T": TiB, "TB": TB, "TIB": TiB,
}
_SIZE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*$")


def parse_size_bytes(text: str | int | float) -> int:
    """Parse ``"1GiB"``, ``"256MB"``, ``"8B"``, ``"4K"`` or a plain number into bytes.

    Bare K/M/G/T are binary, as nccl-tests' ``-b 8M`` is. Raises ValueError naming the
    allowed suffixes.
    """
    if isinstance(text, (int, float)):
        if text < 0:
            raise ValueError(f"size must be >= 0, got {text}")
        return int(text)
    m = _SIZE_RE.match(text)
    if not m or m.group(2).upper() not in _SIZE_SUFFIX:
        allowed = "B, K/KiB/KB, M/MiB/MB, G/GiB/GB, T/TiB/TB"
        raise ValueError(f"{text!r} is not a size; use a number with an optional suffix ({allowed})")
    return int(float(m.group(1)) * _SIZE_SUFFIX[m.group(2).upper()])


def format_size(size_bytes: float) -> str:
    """Human-readable binary size: 1048576 -> '1MiB'."""
    for unit, scale in (("TiB", TiB), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if size_bytes >= scale:
            value = size_bytes / scale
            return f"{value:g}{unit}" if value == int(value) else f"{value:.2f}{unit}"
    return f"{int(size_bytes)}B"
