"""nccl-tests output: parsing real formats and fitting one profile to one or several logs."""

import json
import statistics
from pathlib import Path

import pytest

from clustersim.calibrate.nccl_tests import parse_nccl_tests
from clustersim.cli import main
from clustersim.errors import InputError
from tests.validation.nccl_logs import curve_time_us, h200_issue_log, nccl_log

DATA = Path(__file__).parent / "data"
LOG = DATA / "all_reduce_perf_2x8_a100.log"
H200 = DATA / "all_reduce_perf_8x_h200.log"
SIZES = [2**k for k in range(3, 34)]
H100 = "NVIDIA H100 80GB HBM3"


def _run(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def test_parse_header_ranks_and_rows():
    run = parse_nccl_tests(LOG.read_text())[0]
    assert run.op == "all_reduce" and run.op_source == "log"
    assert (run.ranks, run.nodes, run.ranks_per_node) == (16, 2, 8)
    assert run.device == "NVIDIA A100-SXM4-80GB"
    assert run.nccl_version == "2.18.5+cuda12.2"
    assert len(run.rows) == 31  # 8 B .. 8 GiB by factors of 2: 2**3 .. 2**33
    last = run.rows[-1]
    assert last.size_bytes == 8 * 2**30 and last.count == 2 * 2**30 and last.dtype == "float"
    assert last.time_s == pytest.approx(87810e-6) and last.in_place_time_s == pytest.approx(87388e-6)
    assert last.measured_s == pytest.approx((87810e-6 + 87388e-6) / 2)


def test_rows_obey_nccl_tests_definitions():
    # nccl-tests doc/PERFORMANCE.md: algbw = S / t; busbw = algbw * 2(n-1)/n for all_reduce (n = 16)
    run = parse_nccl_tests(LOG.read_text())[0]
    for row in run.rows:
        if row.size_bytes >= 2**20:  # printed with 2 decimals: check where they carry 3+ digits
            assert row.algbw_GBps == pytest.approx(row.size_bytes / row.time_s / 1e9, rel=5e-3)
            assert row.busbw_GBps == pytest.approx(row.algbw_GBps * 2 * 15 / 16, rel=5e-3)


@pytest.mark.parametrize("op, expected", [("all_reduce", "all_reduce"), ("reduce_scatter", "reduce_scatter"),
                                          ("broadcast", "broadcast"), ("reduce", "reduce"), ("sendrecv", "send_recv")])
def test_collective_recognised_from_columns(op, expected):
    text = nccl_log(op, ["h"] * 8, H100, lambda s: curve_time_us(op, 8, s, 300, 2**22, 10), SIZES[:20], named=False)
    run = parse_nccl_tests(text)[0]
    assert (run.op, run.op_source) == (expected, "columns")


def test_all_gather_and_alltoall_need_op():
    # same columns (redop none, root -1, per-rank count) and the same bus factor: --op decides
    text = nccl_log("alltoall", ["h"] * 8, H100, lambda s: curve_time_us("alltoall", 8, s, 300, 2**22, 10),
                    SIZES[:20], named=False)
    with pytest.raises(InputError) as exc:
        parse_nccl_tests(text)
    assert "all_gather" in str(exc.value) and "alltoall" in str(exc.value)
    assert parse_nccl_tests(text, op="alltoall")[0].op == "all_to_all"
    assert parse_nccl_tests(text, op="all_to_all")[0].op == "all_to_all"


def test_old_and_mpi_tagged_formats():
    t = lambda s: curve_time_us("all_gather", 8, s, 360, 2**22, 11)  # noqa: E731
    new = parse_nccl_tests(nccl_log("all_gather", ["h"] * 8, H100, t, SIZES))[0]
    old = parse_nccl_tests(nccl_log("all_gather", ["h"] * 8, H100, t, SIZES, style="old"))[0]
    mpi = parse_nccl_tests(nccl_log("all_gather", ["h"] * 8, H100, t, SIZES, style="mpi"))[0]
    na = parse_nccl_tests(nccl_log("all_gather", ["h"] * 8, H100, t, SIZES, wrong="N/A"))[0]  # -c 0
    for run in (old, mpi, na):
        assert run.op == "all_gather" and run.ranks == 8 and run.device == H100
        assert [r.measured_s for r in run.rows] == pytest.approx([r.measured_s for r in new.rows], rel=1e-3)
    assert old.rows[0].root is None and new.rows[0].root == -1


def test_several_runs_in_one_file_and_colours():
    a = nccl_log("all_reduce", ["h"] * 8, H100, lambda s: curve_time_us("all_reduce", 8, s, 480, 2**24, 14), SIZES)
    b = nccl_log("all_gather", ["h"] * 8, H100, lambda s: curve_time_us("all_gather", 8, s, 360, 2**22, 11), SIZES)
    text = a + "# Collective test concluded: all_reduce_perf\n" + "\x1b[32m" + b.replace("\n#  Rank", "\n\x1b[0m#  Rank")
    runs = parse_nccl_tests(text)
    assert [r.op for r in runs] == ["all_reduce", "all_gather"] and all(len(r.rows) == len(SIZES) for r in runs)


def test_rank_lines_missing_ranks_from_bus_factor():
    text = "\n".join(line for line in h200_issue_log().splitlines() if "Rank" not in line)
    run = parse_nccl_tests(text)[0]
    assert run.ranks == 8 and run.nodes == 1


def test_not_a_log_is_an_input_error():
    with pytest.raises(InputError):
        parse_nccl_tests("hello\nworld\n")


def test_a_log_without_a_table_is_named(tmp_path, capsys):
    """Among several logs, the one without a results table is named (the message said 'log')."""
    bad = tmp_path / "nccl_hdr.log"
    bad.write_text("# nThread 1 nGpus 1 minBytes 8 maxBytes 128 step: 2(factor) warmup iters: 5 iters: 20\n")
    with pytest.raises(SystemExit) as exc:
        main(["calibrate", "--nccl-tests", str(bad), "--nccl-tests", str(LOG), "--out", str(tmp_path / "p.yaml")])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "error: --nccl-tests: got 'nccl_hdr.log'" in err, err


def test_issue_h200_log_keeps_nvls_and_reproduces_large_sizes(tmp_path, capsys):
    """The issue: this log once gave a profile without NVLS, 26% low at 16 GiB, with a 3.1% fit
    error printed beside per-size errors of 30-36%. The errors checked here are recomputed from
    the written profile by `clustersim collective`, as a user would."""
    out = tmp_path / "h200.yaml"
    code, stdout, _ = _run(["calibrate", "--nccl-tests", str(H200), "--name", "h200-cal", "--out", str(out),
                            "--json"], capsys)
    assert code == 0
    doc = json.loads(stdout)
    assert doc["base_cluster"] == "hgx-h200" and doc["runs"][0]["op_from"] == "columns"
    assert "nvls: true" in out.read_text()
    measured = {r.size_bytes: r.measured_s for r in parse_nccl_tests(H200.read_text())[0].rows}
    errors = []
    for row in doc["rows"]:
        if row["size_bytes"] < 16 * 2**20:
            continue
        code, stdout, _ = _run(["collective", "all_reduce", "--profile", str(out), "--cluster", "h200-cal",
                                "--gpus", "8", "--size", str(row["size_bytes"]), "--json"], capsys)
        assert code == 0
        got = json.loads(stdout)
        err = (got["time_s"] / measured[row["size_bytes"]] - 1) * 100
        assert err == pytest.approx(row["error_pct"], abs=0.01)  # the report is the profile as written
        assert got["algo"] == "nvls"
        errors.append(abs(err))
    assert len(errors) == 11 and max(errors) <= 10 and statistics.median(errors) <= 5
    s = doc["summary"]
    assert s["max_abs_err_pct_16MiB_plus"] == pytest.approx(max(errors), abs=0.01)


def test_several_logs_fit_one_profile(tmp_path):
    """all_reduce (NVLS), all_gather (old format), reduce_scatter (no binary name) on one node and
    an all_gather across two nodes: one profile, both fabrics fitted, the preset's capabilities kept."""
    from clustersim.calibrate.import_nccl import fit_nccl_tests
    from clustersim.calibrate.profile import profile_in_env
    from clustersim.hardware.load import load_cluster
    one, two = ["a"] * 8, ["a"] * 8 + ["b"] * 8
    logs = [("ar", nccl_log("all_reduce", one, H100, lambda s: curve_time_us("all_reduce", 8, s, 480, 20 * 2**20, 14),
                            SIZES)),
            ("ag", nccl_log("all_gather", one, H100, lambda s: curve_time_us("all_gather", 8, s, 365, 6 * 2**20, 11),
                            SIZES, style="old")),
            ("rs", nccl_log("reduce_scatter", one, H100,
                            lambda s: curve_time_us("reduce_scatter", 8, s, 355, 8 * 2**20, 12), SIZES, named=False)),
            ("ag2", nccl_log("all_gather", two, H100,
                             lambda s: curve_time_us("all_gather", 16, s, 340, 30 * 2**20, 25), SIZES))]
    res = fit_nccl_tests(logs, None, "h100-fit", tmp_path / "p.yaml")
    assert res.base_cluster == "dgx-h100" and set(res.fabric_names) == {"scale_up", "scale_out"}
    assert {"scale_up.bw", "scale_up.nvls_bw", "scale_out.bw"} <= set(res.fit.knobs)
    with profile_in_env(res.profile_path):
        c = load_cluster("h100-fit", 2)
    assert c.scale_up.nvls and c.scale_up.nvls_bw_bytes_per_s > 0 and c.scale_out.switch_latency_s > 0
    assert c.pcie is not None and c.nics_per_node == 8
    big = [abs(r.error_pct) for r in res.rows if r.size_bytes >= 16 * 2**20]
    assert len(big) == 4 * 10 and statistics.median(big) <= 5 and max(big) <= 20


@pytest.mark.parametrize("content, expected", [
    (b"", "empty"),
    (b"\x00\x01\x02binary", "binary"),
    (b"[rank0]: iteration 10/100 | elapsed time per iteration (ms): 1234.5 |\n", "results table"),
    (b"# nThread 1 nGpus 1 minBytes 8 maxBytes 128\n#  Rank  0 Group  0 Pid 1 on h device 0 [0x1] NVIDIA H100\n",
     "results table"),
])
def test_bad_logs_exit_2_and_write_nothing(content, expected, tmp_path, capsys):
    log = tmp_path / "bad.log"
    log.write_bytes(content)
    out = tmp_path / "never.yaml"
    code, _, err = _run(["calibrate", "--nccl-tests", str(log), "--cluster", "dgx-h100", "--out", str(out)], capsys)
    assert code == 2 and expected in err and not out.exists()


def test_unknown_gpu_needs_cluster(tmp_path, capsys):
    text = nccl_log("all_reduce", ["h"] * 4, "NVIDIA GeForce RTX 4090",
                    lambda s: curve_time_us("all_reduce", 4, s, 20, 2**22, 20), SIZES[:25])
    log = tmp_path / "rtx.log"
    log.write_text(text)
    code, _, err = _run(["calibrate", "--nccl-tests", str(log), "--out", str(tmp_path / "p.yaml")], capsys)
    assert code == 2 and "--cluster" in err and "RTX 4090" in err


@pytest.mark.parametrize("column", [-5, -1])   # the out-of-place or the in-place #wrong
def test_rows_nccl_tests_marked_wrong_are_no_measurement(column):
    """nccl-tests' own check (#wrong > 0: the collective returned wrong data) was ignored and the
    rows fitted like any others; a log with such rows is refused, naming the file."""
    lines = LOG.read_text().splitlines()
    i = next(k for k, line in enumerate(lines) if line.split()[:1] == [str(2**24)])
    toks = lines[i].split()
    assert toks[column] == "0"
    toks[column] = "1234"
    lines[i] = "  ".join(toks)
    with pytest.raises(InputError, match=r"#wrong > 0 \(sizes 16777216 B\)") as err:
        parse_nccl_tests("\n".join(lines), source="bad.log")
    assert err.value.field == "--nccl-tests" and err.value.value == "bad.log"
    assert all(row.wrong == 0 for run in parse_nccl_tests(LOG.read_text()) for row in run.rows)


def test_a_log_of_another_gpu_than_the_clusters_is_refused(tmp_path, capsys):
    """An H200's nccl-tests log with --cluster dgx-h100 wrote an "H100" profile with H200 numbers
    (exit 0); the log's own GPU, or none given, still calibrates."""
    code, _, err = _run(["calibrate", "--nccl-tests", str(H200), "--cluster", "dgx-h100",
                         "--out", str(tmp_path / "p.yaml")], capsys)
    assert code == 2 and "--cluster: got 'dgx-h100'" in err and "NVIDIA H200" in err and "hgx-h200" in err, err
    assert not (tmp_path / "p.yaml").exists()
    for extra in (["--cluster", "hgx-h200"], []):
        code, _, err = _run(["calibrate", "--nccl-tests", str(H200), *extra, "--out", str(tmp_path / "q.yaml")], capsys)
        assert code == 0, err
