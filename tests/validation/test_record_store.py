"""The JSONL store keeps every complete record, skips a torn last line, and knows what to resume."""

from clustersim.calibrate.store import append_record, done_names, latest_by_name, read_records


def test_append_and_read_back_in_order(tmp_path):
    path = tmp_path / "records.jsonl"
    append_record(path, {"name": "a", "config_id": "x", "measured_s": 1.0})
    append_record(path, {"name": "b", "config_id": "x", "measured_s": 2.0})
    assert [r["name"] for r in read_records(path)] == ["a", "b"]


def test_torn_last_line_is_skipped_and_next_record_starts_a_new_line(tmp_path):
    path = tmp_path / "records.jsonl"
    append_record(path, {"name": "a", "config_id": "x"})
    with path.open("a") as f:  # a writer killed mid-line
        f.write('{"name": "b", "config_i')
    assert [r["name"] for r in read_records(path)] == ["a"]
    append_record(path, {"name": "c", "config_id": "x"})
    assert [r["name"] for r in read_records(path)] == ["a", "c"]
    assert path.read_text().count("\n") == 3  # a, the torn line closed, c


def test_done_names_only_for_the_same_configuration(tmp_path):
    path = tmp_path / "records.jsonl"
    append_record(path, {"name": "a", "config_id": "x"})
    append_record(path, {"name": "b", "config_id": "y"})
    assert done_names(path, "x") == {"a"}
    assert done_names(tmp_path / "missing.jsonl", "x") == set()


def test_latest_record_of_a_case_wins():
    recs = [{"name": "b", "config_id": "x", "v": 1}, {"name": "a", "config_id": "x", "v": 2},
            {"name": "b", "config_id": "x", "v": 3}, {"name": "a", "config_id": "y", "v": 4}]
    latest = latest_by_name(recs, "x")
    assert list(latest) == ["a", "b"]
    assert latest["b"]["v"] == 3 and latest["a"]["v"] == 2
