"""Hardware profiles: every number has its source beside it, and every entry of every profile
file (shipped or a user's --profile) is schema-checked, naming the file, the entry and the field."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from clustersim.errors import InputError
from clustersim.hardware import load, schema

ROOT = Path(__file__).resolve().parents[2]
PROFILES = ROOT / "hardware_profiles"
# a YAML line whose value is a number (key: 12.5, key: 1e-3), with what follows it
_NUMERIC = re.compile(r"^\s*[A-Za-z0-9_.-]+:\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*(?P<rest>#.*)?$")


def uncited_numbers(text: str) -> list[str]:
    """Lines holding a numeric value without a comment of at least a few words beside it."""
    bad = []
    for line in text.splitlines():
        m = _NUMERIC.match(line)
        if m is None:
            continue
        rest = m.group("rest") or ""
        if len(rest.lstrip("# ").split()) < 2:
            bad.append(line.strip())
    return bad


def test_the_source_check_can_fail() -> None:
    text = ("x:\n  bw_GBps: 50            # NDR 400 Gb/s datasheet\n  latency_us: 2.7\n  eff: 0.9 #\n  n: 4  # x\n"
            "  description: 1 GbE, TCP\n")
    assert uncited_numbers(text) == ["latency_us: 2.7", "eff: 0.9 #", "n: 4  # x"]


@pytest.mark.parametrize("name", ["gpus.yaml", "fabrics.yaml", "clusters.yaml"])
def test_every_number_in_hardware_profiles_has_a_source(name: str) -> None:
    text = (PROFILES / name).read_text()
    numbers = [line for line in text.splitlines() if _NUMERIC.match(line)]
    assert len(numbers) > 20, "the pattern found no numeric fields: is it still matching the files?"
    assert uncited_numbers(text) == []


SHIPPED = {section: yaml.safe_load((PROFILES / f"{section}.yaml").read_text()) for section in load.SECTIONS}
NUMERIC_KEY = {"gpus": "hbm_bw_GBps", "fabrics": "latency_us", "clusters": "gpus_per_node"}
CASES = [(section, name) for section in load.SECTIONS for name in sorted(SHIPPED[section])]


def _catalog_error(path: Path) -> InputError:
    with pytest.raises(InputError) as exc:
        load._catalog_for((load._file_key(path.resolve()),))
    return exc.value


@pytest.mark.parametrize("section,name", CASES, ids=[f"{s}.{n}" for s, n in CASES])
def test_bad_value_in_any_entry_names_file_entry_and_field(tmp_path: Path, section: str, name: str) -> None:
    """A user profile that shadows a shipped entry with one bad field is refused, whichever entry."""
    key = NUMERIC_KEY[section]
    cases = {"negative": (key, -1), "unknown key": ("turbo_mode", 1), "not a number": (key, "fast")}
    if section == "gpus":
        cases["negative peak"] = ("peak_TFLOPS", {**SHIPPED[section][name]["peak_TFLOPS"], "bf16": -5})
    for what, (field, value) in cases.items():
        entry = {**SHIPPED[section][name], field: value}
        path = tmp_path / f"bad-{section}-{name}-{what.replace(' ', '_')}.yaml"
        path.write_text(yaml.safe_dump({section: {name: entry}}))
        err = _catalog_error(path)
        assert path.name in err.field, what
        assert f"{section}.{name}." in err.field, what
        assert field in err.field, what


def test_shipped_files_are_checked_in_full(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An entry no scenario uses is still checked: a broken shipped file fails at load."""
    copy = tmp_path / "hardware_profiles"
    shutil.copytree(PROFILES, copy)
    text = (copy / "fabrics.yaml").read_text().replace("bw_GBps: 12.5 ", "bw_GBps: -12.5 ", 1)
    (copy / "fabrics.yaml").write_text(text)
    monkeypatch.setattr(load, "shipped_profile_dir", lambda: copy)
    load._catalog_for.cache_clear()  # the cache is keyed on the user files only
    try:
        with pytest.raises(InputError, match=r"fabrics.yaml: fabrics.ib-edr.bw_GBps"):
            load._catalog_for(())
    finally:
        load._catalog_for.cache_clear()


def test_cluster_references_and_domain_are_checked(tmp_path: Path) -> None:
    path = tmp_path / "refs.yaml"
    path.write_text(yaml.safe_dump({"clusters": {"mine": {**SHIPPED["clusters"]["dgx-h100"], "gpu": "h999"}}}))
    assert _catalog_error(path).field.endswith("clusters.mine.gpu")
    path.write_text(yaml.safe_dump({"clusters": {"mine": {**SHIPPED["clusters"]["gb200-nvl72"],
                                                          "scale_up_domain": 70}}}))
    assert _catalog_error(path).field.endswith("clusters.mine.scale_up_domain")


def test_schema_accepts_every_shipped_entry() -> None:
    for section, entries in SHIPPED.items():
        for name, entry in entries.items():
            schema.check_entry(PROFILES / f"{section}.yaml", section, name, entry)


def test_cli_profile_with_a_bad_entry_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text("gpus:\n  unused-gpu:\n    peak_TFLOPS: {bf16: -1}\n    hbm_bw_GBps: 1000\n    hbm_capacity_GiB: 80\n")
    p = subprocess.run([sys.executable, "-m", "clustersim", "collective", "all_reduce", "--profile", str(path),
                        "--size", "1MiB"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, p.stderr
    assert "mine.yaml: gpus.unused-gpu.peak_TFLOPS.bf16" in p.stderr
    assert "Traceback" not in p.stderr


@pytest.mark.parametrize("entry,field", [
    ("gpus:\n  slow:\n    peak_TFLOPS: {bf16: 100}\n    hbm_bw_GBps: 1.0e-300\n    hbm_capacity_GiB: 80\n", "hbm_bw_GBps"),
    ("gpus:\n  slow:\n    peak_TFLOPS: {bf16: 100}\n    hbm_bw_GBps: 1000\n    hbm_capacity_GiB: 80\n"
     "    compute_scale: 1.0e-300\n", "compute_scale"),
    ("clusters:\n  farm:\n    gpu: h100-sxm-80gb\n    gpus_per_node: 8\n    scale_up: nvlink4-nvswitch\n"
     "    scale_out: ib-ndr\n    pue: 1000\n", "pue")])
def test_profile_numbers_have_a_floor_and_pue_the_scenario_bounds(tmp_path: Path, entry: str, field: str) -> None:
    """A GPU of 1e-300 GB/s gave a 300-digit step time with exit 0; a profile PUE of 1000 was taken
    where the scenario and --pue stop at 100."""
    path = tmp_path / "mine.yaml"
    path.write_text(entry)
    p = subprocess.run([sys.executable, "-m", "clustersim", "collective", "all_reduce", "--profile", str(path),
                        "--size", "1MiB"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, p.stderr
    assert f".{field}" in p.stderr and "Traceback" not in p.stderr
