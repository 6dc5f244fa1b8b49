"""Writing sweep results: atomically, so that an interrupted sweep leaves a complete file or none.

The table goes to a temporary file in the target's directory (same file system), is flushed and
fsync'ed, then ``os.replace``'d over the target (atomic on POSIX and Windows); the directory is
fsync'ed so that the rename itself survives a crash (POSIX rename(2) semantics).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO

import pandas as pd

from clustersim.errors import InputError

TABLE_SUFFIXES = (".csv", ".parquet")


def check_table_path(path: str | os.PathLike[str], option: str = "--out") -> Path:
    """Fail early (exit 2) on an output that cannot be written, before any work is done."""
    p = Path(path)
    if p.suffix.lower() not in TABLE_SUFFIXES:
        raise InputError(option, str(path), "a file name ending in .csv or .parquet")
    if p.suffix.lower() == ".parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise InputError(option, str(path), "a .csv file, or install pyarrow for .parquet: "
                                                "pip install 'clustersim[parquet]'") from None
    check_writable_dir(p, option)
    return p


def check_writable_dir(p: Path, option: str) -> None:
    parent = p.resolve().parent
    if not parent.is_dir() or not os.access(parent, os.W_OK):
        raise InputError(option, str(p), "a path in an existing, writable directory")


def atomic_write(path: str | os.PathLike[str], write: Callable[[IO[bytes]], None]) -> None:
    """Call ``write(f)`` on a temporary binary file next to ``path``, then move it into place."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(dir=target.resolve().parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the file the usual mode
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(target.resolve().parent)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # Windows cannot open directories; os.replace is durable enough there
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_table(df: pd.DataFrame, path: str | os.PathLike[str]) -> None:
    """CSV or parquet by suffix, atomically. Byte-identical for identical frames."""
    p = check_table_path(path)
    if p.suffix.lower() == ".csv":
        atomic_write(p, lambda f: f.write(df.to_csv(index=False, lineterminator="\n").encode()))
    else:
        atomic_write(p, lambda f: df.to_parquet(f, index=False, engine="pyarrow"))
