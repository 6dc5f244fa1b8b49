"""torchtitan's ``fsdp_reshard_after_forward`` policy (torchtitan/models/llama3/infra/parallelize.py
apply_fsdp: "always" | "never" | "default") as ``parallel.fsdp.reshard_after_forward``
(clustersim/importers/torchtitan.py; "default" left to clustersim.frameworks.reshards_after_forward)."""

from __future__ import annotations

import pytest

from clustersim.errors import InputError
from clustersim.importers import finish, import_text

BASE = """[model]
name = "llama3"
flavor = "8B"
[training]
local_batch_size = 1
seq_len = 8192
[parallelism]
data_parallel_shard_degree = -1
pipeline_parallel_degree = 2
{extra}
"""


def _import(extra):
    text = BASE.format(extra=extra)
    return finish(import_text("torchtitan-toml", text, "job.toml", cluster="dgx-h100", nodes=2), []).scenario


def test_importer_maps_the_reshard_policy():
    got = {policy: _import(f'fsdp_reshard_after_forward = "{policy}"')["parallel"]["fsdp"].get("reshard_after_forward")
           for policy in ("always", "never", "default")}
    assert got == {"always": True, "never": False, "default": None}


@pytest.mark.parametrize("value", ['"sometimes"', "true"])
def test_importer_refuses_another_reshard_policy_by_name(value):
    with pytest.raises(InputError) as exc:
        _import(f"fsdp_reshard_after_forward = {value}")
    assert exc.value.field == "parallelism.fsdp_reshard_after_forward"
