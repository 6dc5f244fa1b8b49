"""Scenario files: YAML -> validated, frozen Scenario (loader, sections, checks, the spec)."""

from clustersim.scenario.checks import check_layout, check_recompute
from clustersim.scenario.loader import (
    DEFAULT_CLUSTER_PRESET,
    DEFAULT_SCENARIO_YAML,
    apply_overrides,
    load_scenario,
    read_hf_config,
    read_scenario_dict,
    resolve_model,
    scenario_from_dict,
)
from clustersim.scenario.sections import ParallelSection, ScenarioFile
from clustersim.scenario.spec import Scenario, TrainingSpec
from clustersim.workload.model_fields import model_from_fields

__all__ = [
    "DEFAULT_CLUSTER_PRESET", "DEFAULT_SCENARIO_YAML", "ParallelSection", "Scenario", "ScenarioFile", "TrainingSpec", "apply_overrides",
    "check_layout", "check_recompute", "load_scenario", "model_from_fields", "read_hf_config", "read_scenario_dict",
    "resolve_model", "scenario_from_dict",
]
