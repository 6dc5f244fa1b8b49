"""Atomic output: a complete file or none; CSV always, parquet with pyarrow, a clear error without."""

from __future__ import annotations

import builtins

import pandas as pd
import pytest

from clustersim.errors import InputError
from clustersim.output_file import atomic_write
from clustersim.sweep.output import check_table_path, write_table

FRAME = pd.DataFrame({"tp": [8, 4], "tokens_per_s": [1.5, 0.25], "schedule": ["1f1b", "gpipe"]})


def test_csv_round_trip_and_byte_identical(tmp_path):
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    write_table(FRAME, a)
    write_table(FRAME, b)
    assert a.read_bytes() == b.read_bytes()
    assert pd.read_csv(a).equals(FRAME)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.csv", "b.csv"]  # no temporary files left


def test_interrupted_write_leaves_the_old_file(tmp_path):
    target = tmp_path / "out.csv"
    target.write_text("old complete file\n")

    def explode(f):
        f.write(b"half a tab")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atomic_write(target, explode)
    assert target.read_text() == "old complete file\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.csv"]


def test_interrupted_first_write_leaves_no_file(tmp_path):
    with pytest.raises(RuntimeError):
        atomic_write(tmp_path / "new.csv", lambda f: (_ for _ in ()).throw(RuntimeError("disk full")))
    assert list(tmp_path.iterdir()) == []


def test_parquet_round_trip(tmp_path):
    pytest.importorskip("pyarrow")
    p = tmp_path / "x.parquet"
    write_table(FRAME, p)
    assert pd.read_parquet(p).equals(FRAME)


def test_parquet_without_pyarrow_is_a_clear_input_error(tmp_path, monkeypatch):
    real_import = builtins.__import__

    def no_pyarrow(name, *args, **kwargs):
        if name == "pyarrow" or name.startswith("pyarrow."):
            raise ImportError("no pyarrow")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pyarrow)
    with pytest.raises(InputError, match="pip install 'clustersim\\[parquet\\]'"):
        check_table_path(tmp_path / "x.parquet")


@pytest.mark.parametrize("name", ["x.txt", "x", "x.json"])
def test_other_suffixes_are_refused(tmp_path, name):
    with pytest.raises(InputError, match=".csv or .parquet"):
        check_table_path(tmp_path / name)
