"""The OpenAI-compatible backend at concurrency 32: every call succeeds, connections are reused.

Regression tests for what the live-concurrency benchmark found: the loopback server's listen
backlog of 5 reset connections opened in a burst (ReadError), and httpx's default pool closed
every connection past 20 after each response, so each call opened a new one. The transport is
httpx over aiohttp's pool now; these still pin both behaviours.
"""

from __future__ import annotations

import dataclasses

from evals_pipeline.core.extractors.base import TransportExtractor
from evals_pipeline.core.extractors.openai_compat import OpenAICompatTransport
from evals_pipeline.core.models import Episode
from evals_pipeline.core.options import ExtractOptions
from evals_pipeline.core.runner import extract_all, run_sync
from evals_pipeline_tests.support.deterministic_backend import openai_responder
from evals_pipeline_tests.support.llm_servers import LoopbackLLMServer, ReceivedRequest, Reply

CONCURRENCY = 32
EPISODES = [
    Episode(name=f"ep-{i:02d}", body=f"Alice Smith met Bob Jones in Paris in {1900 + i}.")
    for i in range(2 * CONCURRENCY)
]


def _slow(request: ReceivedRequest) -> Reply:
    # Long enough that all 32 requests are in flight together, so 32 connections open at once.
    return dataclasses.replace(openai_responder(request), delay_s=0.05)


def test_concurrency_32_succeeds_and_reuses_connections() -> None:
    with LoopbackLLMServer("openai", responder=_slow) as server:
        extractor = TransportExtractor(
            OpenAICompatTransport(url=server.url, model="rules", max_retries=0)
        )

        async def run() -> list:
            try:
                return await extract_all(
                    extractor, EPISODES, ExtractOptions(), concurrency=CONCURRENCY
                )
            finally:
                await extractor.aclose()

        runs = run_sync(run)
        assert [r.error for r in runs if not r.ok] == []
        assert len(server.requests) == 2 * len(EPISODES)  # entities + edges per chunk
        # 128 calls, at most 32 in flight: kept-alive connections serve them all.
        assert server.connections <= CONCURRENCY
