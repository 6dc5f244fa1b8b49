"""The job beside a log that does not describe it: ``--config FILE`` in any format that
`clustersim import` reads (a Megatron-LM command line, arguments file or arguments block, a
torchtitan TOML, a DeepSpeed JSON), or a clustersim scenario (YAML). The format is recognised
from the content, so the user need not say it (docs/calibration.md)."""

from __future__ import annotations

import json
from typing import Any

import yaml

from clustersim.errors import InputError
from clustersim.importers.common import ImportResult

SCENARIO_SECTIONS = {"model", "cluster", "parallel"}


def config_kind(text: str) -> str:
    """clustersim-scenario | deepspeed-json | torchtitan-toml | megatron-args."""
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            if isinstance(json.loads(text), dict):
                return "deepspeed-json"
        except json.JSONDecodeError:
            pass
    if "pretrain_" in text or "--num-layers" in text or "--tensor-model-parallel-size" in text or (
            "arguments" in text and "-----" in text):
        return "megatron-args"
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        data = None
    if isinstance(data, dict) and SCENARIO_SECTIONS & set(data):
        return "clustersim-scenario"
    if any(line.strip().startswith(("[job]", "[model]", "[training]", "[parallelism]")) for line in text.splitlines()):
        return "torchtitan-toml"
    return "megatron-args"


def import_config(text: str, source: str, cluster: str | None, nodes: int | None) -> ImportResult:
    """The scenario a job config describes (no step times: the log beside it has them)."""
    kind = config_kind(text)
    if kind == "clustersim-scenario":
        data: dict[str, Any] = yaml.safe_load(text)
        data = dict(data)
        if cluster is not None or nodes is not None:
            data["cluster"] = {**(data.get("cluster") or {}), **({"preset": cluster} if cluster else {}),
                               **({"nodes": nodes} if nodes else {})}
        framework = str(data.get("framework", "megatron-core"))
        return ImportResult(kind, source, framework, data, notes=[f"scenario from {source}"])
    from clustersim.importers import import_text
    try:
        return import_text(kind, text, source, cluster=cluster, nodes=nodes)
    except InputError as exc:
        raise InputError("--config", source, f"a job config clustersim import reads (Megatron-LM command line or "
                         f"arguments, torchtitan TOML, DeepSpeed JSON) or a clustersim scenario; read as {kind}: "
                         f"{exc}") from None
