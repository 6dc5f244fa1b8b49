"""Writing the sweep's table: CSV or parquet by suffix, checked before the sweep runs and written
atomically, so that an interrupted sweep leaves a complete file or none (clustersim.output_file)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from clustersim.errors import InputError
from clustersim.output_file import atomic_write, check_output_path

TABLE_SUFFIXES = (".csv", ".parquet")


def check_table_path(path: str | os.PathLike[str], option: str = "--out",
                     inputs: Iterable[str | os.PathLike[str]] = ()) -> Path:
    """Fail early (exit 2) on an output that cannot be written, or is one of the command's
    ``inputs``, before any work is done."""
    p = check_output_path(path, option, TABLE_SUFFIXES, inputs)
    if p.suffix.lower() == ".parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise InputError(option, str(path), "a .csv file, or install pyarrow for .parquet: "
                                                "pip install 'clustersim[parquet]'") from None
    return p


def write_table(df: pd.DataFrame, path: str | os.PathLike[str]) -> None:
    """CSV or parquet by suffix, atomically. Byte-identical for identical frames."""
    p = check_table_path(path)
    if p.suffix.lower() == ".csv":
        atomic_write(p, lambda f: f.write(df.to_csv(index=False, lineterminator="\n").encode()))
    else:
        atomic_write(p, lambda f: df.to_parquet(f, index=False, engine="pyarrow"))
