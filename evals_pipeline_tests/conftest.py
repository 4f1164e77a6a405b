"""Suite-wide fixtures: a hermetic environment, a suite log, and a credential-leak scan.

Every test runs with the project's environment variables cleared, and every log record of the
suite (ours, httpx's, the anthropic SDK's, Dagster's) goes to one file under the pytest base
temp dir, so the leak scan that runs last can read everything the suite wrote.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from evals_pipeline_tests.support.hermetic import PROVIDER_ENV

TEST_API_KEY = "sk-ant-test-0000-do-not-leak-7f3a9c"
TEST_OAI_KEY = "sk-oai-test-1111-do-not-leak-2b8e4d"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "last: run after every other test (the leak scan)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.get_closest_marker("last") is not None)


@pytest.fixture(autouse=True)
def _hermetic_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROVIDER_ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="session", autouse=True)
def suite_log(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.getbasetemp() / "suite.log"
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    root = logging.getLogger()
    previous = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    yield path
    root.removeHandler(handler)
    root.setLevel(previous)
    handler.close()


@pytest.fixture
def shared_folder() -> Iterator[Path]:
    """A folder another user can reach (pytest's tmp_path is under a 0700 folder)."""
    folder = Path(tempfile.mkdtemp(prefix="evals-locks-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
