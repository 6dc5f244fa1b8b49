"""`clustersim validate` and `clustersim calibrate` at the command line: bad input is exit 2
with a message naming the field; the nccl-tests import prints one JSON object."""

import json
from pathlib import Path

import pytest

from clustersim.cli import main

LOG = Path(__file__).parent / "data" / "all_reduce_perf_2x8_a100.log"


def _run(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def test_validate_rejects_one_rank(capsys, tmp_path):
    pytest.importorskip("torch")
    code, _, err = _run(["validate", "--nprocs", "1", "--out", str(tmp_path)], capsys)
    assert code == 2 and "--nprocs" in err


def test_validate_rejects_netns_with_nccl(capsys, tmp_path):
    pytest.importorskip("torch")
    code, _, err = _run(["validate", "--backend", "nccl", "--netns", "--out", str(tmp_path)], capsys)
    assert code == 2 and "--netns" in err


def test_calibrate_missing_file_is_input_error(capsys, tmp_path):
    code, _, err = _run(["calibrate", "--nccl-tests", str(tmp_path / "nope.log")], capsys)
    assert code == 2 and "--nccl-tests" in err


def test_calibrate_json(capsys, tmp_path):
    out = tmp_path / "fit.yaml"
    code, stdout, _ = _run(["calibrate", "--nccl-tests", str(LOG), "--cluster", "dgx-a100", "--min-size", "1MiB",
                            "--out", str(out), "--json"], capsys)
    assert code == 0
    doc = json.loads(stdout)
    run = doc["runs"][0]
    assert run["op"] == "all_reduce" and run["ranks"] == 16 and run["nodes"] == 2
    assert "scale_out" in doc["fabrics"] and any(k.startswith("scale_out.") for k in doc["knobs"])
    assert doc["profile"] == str(out) and out.is_file()


def test_validate_nccl_without_gpu_says_so(capsys, tmp_path):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    code, _, err = _run(["validate", "--backend", "nccl", "--out", str(tmp_path)], capsys)
    assert code == 2 and "no CUDA GPU" in err and not (tmp_path / "records.jsonl").exists()


def test_validate_nccl_without_gpu_writes_nothing(capsys, tmp_path):
    """docs/calibration.md: bad input is exit 2 and nothing is written. Without CUDA, `--backend
    nccl` created --out and drew the progress bar before saying so."""
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    out = tmp_path / "new" / "dir"
    code, _, err = _run(["validate", "--backend", "nccl", "--ci", "--out", str(out)], capsys)
    assert code == 2 and "no CUDA GPU" in err
    assert not (tmp_path / "new").exists()
    assert "starting ranks" not in err
