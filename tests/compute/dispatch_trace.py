"""The kernels eager PyTorch dispatches for a piece of code, and the bytes they move (a test helper).

Every aten op that is not a view is counted as one kernel (on a GPU each is a launch, an
``at::scalar_tensor`` included: a 0-dim fill); its bytes are the elements of its tensor inputs
and of its output, 0-dim tensors left out. Run on the CPU build of torch (the validation extra):
the dispatcher and autograd run the same ops as on the GPU.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

torch = pytest.importorskip("torch")
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402


def _bytes(x) -> int:
    if isinstance(x, torch.Tensor):
        return x.numel() * x.element_size() if x.dim() else 0
    if isinstance(x, (list, tuple)):
        return sum(_bytes(v) for v in x)
    return 0


class _Trace(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.kernels = 0
        self.bytes = 0
        self.names: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not func.is_view:
            self.kernels += 1
            self.bytes += _bytes(list(args)) + _bytes(out)
            self.names.append(func.overloadpacket.__name__)
        return out


def trace(fn: Callable[[], object]) -> _Trace:
    """Run ``fn`` and record what it dispatches."""
    with _Trace() as t:
        fn()
    return t
