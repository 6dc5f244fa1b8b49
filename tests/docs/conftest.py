"""The --update-readme flag (tests/docs/test_readme.py)."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-readme", action="store_true", default=False,
                     help="Rewrite the README's sample of `clustersim run` from its current output (review the diff!).")


@pytest.fixture
def update_readme(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-readme", default=False))
