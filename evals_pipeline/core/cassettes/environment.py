"""EVALS_RECORD_LLM / EVALS_REPLAY_LLM: record or replay whichever extractor a run resolves.

Replay never calls the factory, so no provider is resolved, no key is read and no client is
built. Setting both variables is a startup error.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from ..errors import ConfigError
from ..extractors.base import Extractor
from .record import RecordingExtractor
from .replay import ReplayingExtractor

RECORD_ENV = "EVALS_RECORD_LLM"
REPLAY_ENV = "EVALS_REPLAY_LLM"


def extractor_from_environment(
    factory: Callable[[], Extractor], environ: Mapping[str, str] | None = None
) -> Extractor:
    env = os.environ if environ is None else environ
    record, replay = env.get(RECORD_ENV), env.get(REPLAY_ENV)
    if record and replay:
        raise ConfigError(f"{RECORD_ENV} and {REPLAY_ENV} are mutually exclusive; set only one")
    if replay:
        return ReplayingExtractor.from_path(replay, unique=False)
    if record:
        return RecordingExtractor(factory(), record)
    return factory()
