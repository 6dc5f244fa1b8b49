"""clustersim.output_file: every output a command writes is checked before the work (exit 2 naming
the option) and written atomically with the mode a plain open() gives; before this, goodput,
import and calibrate wrote unchecked paths and ended in a traceback after the work, an empty path
was ignored, a long file name failed on the temporary file's longer name, and JSON came out 0600."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from clustersim.errors import InputError
from clustersim.output_file import NAME_MAX_BYTES, check_output_path, write_json_atomic, write_text_atomic

MEGATRON_LOG = Path(__file__).resolve().parents[2] / "validation" / "logs" / "megatron_h100" / "gpt_7.1b_96gpu.log"


def _refused(path: str, option: str = "--out") -> InputError:
    with pytest.raises(InputError) as exc:
        check_output_path(path, option)
    assert exc.value.field == option
    return exc.value


def test_empty_path_a_folder_on_the_way_that_is_a_file_and_a_directory_are_refused(tmp_path: Path) -> None:
    assert "empty path" in str(_refused(""))
    afile = tmp_path / "s.yaml"
    afile.write_text("x: 1\n")
    assert "is a file" in str(_refused(str(afile / "g.json")))
    assert "regular file" in str(_refused(str(tmp_path)))


def test_a_name_at_the_limit_is_written_and_one_past_it_refused(tmp_path: Path) -> None:
    longest = tmp_path / ("a" * (NAME_MAX_BYTES - len(".json")) + ".json")
    write_json_atomic(check_output_path(longest, "--trace"), {"x": 1})   # the temporary name stays short
    assert json.loads(longest.read_text()) == {"x": 1}
    assert "at most 255 bytes" in str(_refused(str(tmp_path / ("a" * NAME_MAX_BYTES + ".json")), "--trace"))


def test_suffixes_missing_folders_and_modes(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"ending in \.html or \.htm"):
        check_output_path(tmp_path / "page.txt", "--html", (".html", ".htm"))
    deep = tmp_path / "new" / "folder" / "t.json"
    write_json_atomic(check_output_path(deep, "--trace"), [1])
    write_text_atomic(tmp_path / "p.yaml", "a: 1\n")
    mask = os.umask(0)
    os.umask(mask)
    for p in (deep, tmp_path / "p.yaml"):
        assert p.stat().st_mode & 0o777 == 0o666 & ~mask, oct(p.stat().st_mode)
    assert not [p for p in tmp_path.rglob(".*") if p.is_file()]   # no temporary file left


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "clustersim", *args], capture_output=True, text=True, timeout=300,
                          cwd=cwd, env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})


@pytest.mark.parametrize("args", [
    ("goodput", "s.yaml", "--days", "1", "--out", "s.yaml/g.json"),
    ("run", "--trace", ""),
    ("calibrate", "--run", "s.yaml=1.7", "--out", ""),
    *([("run", "--trace", "/proc/x.json"), ("run", "--html", "/proc/x.html"),   # no file can be created there
       ("calibrate", "--run", "s.yaml=1.7", "--out", "/proc/x.yaml")] if Path("/proc/self").is_dir() else []),
])
def test_commands_refuse_an_unwritable_output_before_the_work(tmp_path: Path, args: tuple[str, ...]) -> None:
    (tmp_path / "s.yaml").write_text("model: {preset: llama3-8b}\ncluster: {preset: dgx-h100, nodes: 1}\n"
                                     "parallel: {tp: 8, micro_batch: 1, global_batch: 8}\n")
    out = _cli(*args, cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr and args[-2] in out.stderr, out.stderr


def test_an_output_that_is_one_of_the_inputs_is_refused(tmp_path: Path) -> None:
    """The rename would replace the user's file: `calibrate --log x.log --out x.log` lost the log, exit 0."""
    given = tmp_path / "x.log"
    given.write_text("log\n")
    (tmp_path / "link.log").symlink_to(given)
    os.link(given, tmp_path / "hard.log")
    (tmp_path / "sub").mkdir()
    for out in (given, tmp_path / "link.log", tmp_path / "hard.log", tmp_path / "sub" / ".." / "x.log"):
        with pytest.raises(InputError, match="not one of the command's input files") as exc:
            check_output_path(out, "--out", inputs=["-", tmp_path / "missing.yaml", given])
        assert exc.value.field == "--out"
    assert check_output_path(tmp_path / "other.log", "--out", inputs=[given]) == tmp_path / "other.log"


@pytest.mark.parametrize("args", [
    ("calibrate", "--log", "x.log", "--cluster", "dgx-h100", "--out", "x.log"),
    ("calibrate", "--run", "s.yaml=0.8", "--out", "s.yaml"),
    ("calibrate", "--runs", "r.csv", "--out", "s.yaml"),            # a scenario the CSV names
    ("calibrate", "--run", "s.yaml=0.8", "--nccl-tests", "x.log", "--out", "x.log"),
    ("import", "megatron-log", "x.log", "--cluster", "dgx-h100", "--out", "x.log"),
    ("run", "s.yaml", "--trace", "s.yaml"),
    ("run", "s.yaml", "--profile", "p.html", "--html", "p.html"),
    ("goodput", "s.yaml", "--days", "1", "--out", "s.yaml"),
    ("sweep", "s.yaml", "--profile", "s.csv", "--out", "s.csv"),
    ("compare", "s.yaml", "--clusters", "dgx-h100", "--profile", "p.html", "--html", "p.html"),
])
def test_commands_refuse_to_overwrite_their_input(tmp_path: Path, args: tuple[str, ...]) -> None:
    (tmp_path / "s.yaml").write_text("model: {preset: llama3-8b}\ncluster: {preset: dgx-h100, nodes: 1}\n"
                                     "parallel: {tp: 8, micro_batch: 1, global_batch: 8}\n")
    (tmp_path / "x.log").write_text(MEGATRON_LOG.read_text())
    for name in ("p.html", "s.csv"):
        (tmp_path / name).write_text("gpus: {}\n")
    (tmp_path / "r.csv").write_text("scenario,step_time_s\ns.yaml,0.8\n")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    out = _cli(*args, cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    assert f"error: {args[-2]}: got '{args[-1]}'" in out.stderr and "input files" in out.stderr, out.stderr
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_a_link_is_written_through_and_a_loop_refused(tmp_path: Path) -> None:
    """The writer replaces the file a link names (the temporary file sits beside it, so a link into
    another file system no longer ends in EXDEV after the work); a loop of links is exit 2."""
    real = tmp_path / "real" / "t.json"
    real.parent.mkdir()
    real.write_text("old")
    (tmp_path / "link.json").symlink_to(real)
    write_json_atomic(check_output_path(tmp_path / "link.json", "--trace"), [1])
    assert (tmp_path / "link.json").is_symlink() and json.loads(real.read_text()) == [1]
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    assert "loop of symbolic links" in str(_refused(str(tmp_path / "loop" / "t.json"), "--trace"))


def test_a_folder_where_no_file_can_be_created_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """/proc passes os.access for root, then the temporary file fails after the work: the check makes
    one (and removes it)."""
    import tempfile

    def no_files(*args: object, **kwargs: object) -> None:
        raise FileNotFoundError(2, "No such file or directory")
    check_output_path(tmp_path / "t.json", "--trace")
    assert list(tmp_path.iterdir()) == []          # the probe leaves nothing behind
    monkeypatch.setattr(tempfile, "mkstemp", no_files)
    assert "where files can be created" in str(_refused(str(tmp_path / "t.json"), "--trace"))


@pytest.mark.parametrize("target", ["/dev/stdout", "o.txt"])
def test_the_file_behind_standard_output_is_refused(tmp_path: Path, target: str) -> None:
    """`run --trace /dev/stdout > o.txt` ended in an EXDEV traceback after the simulation, and
    `--trace o.txt > o.txt` would swap the file from under the report."""
    if target == "/dev/stdout" and not Path("/dev/stdout").exists():
        pytest.skip("no /dev/stdout here")
    with (tmp_path / "o.txt").open("w") as stdout:
        out = subprocess.run([sys.executable, "-m", "clustersim", "run", "--trace", target], stdout=stdout,
                             stderr=subprocess.PIPE, text=True, timeout=300, cwd=tmp_path,
                             env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr and "standard output" in out.stderr, out.stderr
