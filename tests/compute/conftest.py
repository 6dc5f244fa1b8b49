import pytest

from clustersim.hardware.load import load_gpu
from clustersim.scenario import model_from_fields
from clustersim.workload.presets import MODEL_PRESETS


def preset(name: str):
    return model_from_fields(name, MODEL_PRESETS[name])


@pytest.fixture(scope="session")
def a100():
    return load_gpu("a100-sxm-80gb")


@pytest.fixture(scope="session")
def h100():
    return load_gpu("h100-sxm-80gb")
