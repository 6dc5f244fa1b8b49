"""`clustersim collective`: output keys, sweep, and exit code 2 naming the argument."""

import json

import pytest

from clustersim.cli import main


def run(capsys, *args):
    with pytest.raises(SystemExit) as exc:
        main(["collective", *args])
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def test_json_keys(capsys):
    code, out, _ = run(capsys, "all_reduce", "--cluster", "dgx-a100", "--gpus", "8", "--size", "1GiB", "--json")
    assert code == 0
    data = json.loads(out)
    assert {"time_s", "algbw_GBps", "busbw_GBps", "algo"} <= set(data)
    assert data["busbw_GBps"] == pytest.approx(data["algbw_GBps"] * 1.75)
    assert data["algbw_GBps"] == pytest.approx(2**30 / data["time_s"] / 1e9)


def test_sweep_json_list_and_table(capsys):
    code, out, _ = run(capsys, "all_gather", "--cluster", "dgx-h100", "--gpus", "16", "--sizes", "8B:1KiB", "--json")
    assert code == 0
    rows = json.loads(out)
    # as nccl-tests: below one float32 element per rank (64 B for all_gather on 16 GPUs) no row
    assert [r["size_bytes"] for r in rows] == [64, 128, 256, 512, 1024]
    assert [r["count"] for r in rows] == [1, 2, 4, 8, 16]
    code, out, _ = run(capsys, "all_reduce", "--sizes", "1MiB:4MiB", "--engine", "event")
    assert code == 0 and "busbw" in out and "4194304" in out


def test_event_engine_matches(capsys):
    _, closed, _ = run(capsys, "all_reduce", "--gpus", "16", "--size", "256MiB", "--json")
    _, event, _ = run(capsys, "all_reduce", "--gpus", "16", "--size", "256MiB", "--json", "--engine", "event")
    assert json.loads(event)["time_s"] == pytest.approx(json.loads(closed)["time_s"], rel=0.01)


@pytest.mark.parametrize(("args", "names"), [
    (["allreduce", "--size", "1G"], ["OP", "all_reduce"]),
    (["all_reduce", "--cluster", "dgx-z", "--size", "1G"], ["--cluster", "dgx-a100"]),
    (["all_reduce", "--size", "12XB"], ["--size", "GiB"]),
    (["all_reduce", "--gpus", "12", "--size", "1G"], ["--gpus", "multiple of 8"]),
    (["all_reduce", "--gpus", "0", "--size", "1G"], ["--gpus"]),
    (["all_reduce", "--cluster", "dgx-a100", "--algo", "nvls", "--size", "1G"], ["--algo", "ring"]),
    (["all_reduce", "--algo", "fast", "--size", "1G"], ["--algo", "nvls"]),
    (["all_reduce", "--sizes", "1G:1M"], ["--sizes"]),
    (["all_reduce"], ["--size"]),
    (["all_reduce", "--size", "1G", "--profile", "/nonexistent.yaml"], ["--profile"]),
])
def test_bad_input_exits_2_naming_the_argument(capsys, args, names):
    code, _, err = run(capsys, *args)
    assert code == 2
    for name in names:
        assert name in err


def test_profile_file(capsys, tmp_path, monkeypatch):
    from clustersim.hardware import load

    monkeypatch.setattr(load, "_user_files", [])  # keep the registered file out of other tests
    load._catalog_for.cache_clear()
    prof = tmp_path / "cal.yaml"
    prof.write_text("fabrics:\n  slow-nvlink:\n    kind: nvswitch\n    bw_GBps: 100\n    efficiency: 0.5\n"
                    "    latency_us: 1\nclusters:\n  slow:\n    gpu: a100-sxm-80gb\n    gpus_per_node: 8\n"
                    "    scale_up: slow-nvlink\n    scale_out: ib-hdr\n    nics_per_node: 8\n")
    code, out, _ = run(capsys, "all_gather", "--profile", str(prof), "--cluster", "slow", "--size", "16GiB", "--json")
    assert code == 0
    assert json.loads(out)["busbw_GBps"] == pytest.approx(50, rel=0.01)  # 100 GB/s x 0.5
    load._catalog_for.cache_clear()


def test_nodes_and_gpus_per_node(capsys):
    code, out, _ = run(capsys, "all_reduce", "--cluster", "dgx-a100", "--nodes", "4", "--size", "1G", "--json")
    assert code == 0 and json.loads(out)["gpus"] == 32 and json.loads(out)["nodes"] == 4
    code, out, _ = run(capsys, "all_reduce", "--cluster", "dgx-a100", "--gpus-per-node", "4", "--gpus", "8",
                       "--size", "1G", "--json")
    assert code == 0 and json.loads(out)["nodes"] == 2
    code, _, err = run(capsys, "all_reduce", "--nodes", "2", "--gpus", "8", "--size", "1G")
    assert code == 2 and "--gpus" in err


@pytest.mark.parametrize(("op", "size", "want"), [("all_reduce", "6B", 4), ("all_gather", "100B", 96),
                                                  ("reduce_scatter", "257B", 256)])
def test_a_size_is_taken_in_whole_elements_per_rank(capsys, op, size, want):
    """3 bytes of all_reduce were timed with count 0, 100 bytes of all_gather on 8 GPUs as 12.5
    bytes per rank: nccl-tests rounds the size down to whole float32 elements per rank."""
    code, out, _ = run(capsys, op, "--size", size, "--json")
    assert code == 0 and json.loads(out)["size_bytes"] == want


def test_less_than_one_element_per_rank_is_refused(capsys):
    code, _, err = run(capsys, "all_reduce", "--size", "3B")
    assert code == 2 and "one float32 element per rank" in err
