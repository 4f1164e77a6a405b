"""What a failed step spent: its call counts survive the failure, as an asset observation.

A step that fails after paid calls (a full disk while recording, SIGTERM, a judge outage)
yields no materialisation, so its counts would be lost and the driver's summary would say it
made no call. The asset yields this observation before it re-raises: an event yielded is
logged at once, where one passed to `context.log_event` waits for the next output, which a
failing step never yields.

    try:
        table = extraction_table(...)
    except BaseException:
        yield spend_before_failure(context, extractor_spent(extractor))
        raise
"""

from __future__ import annotations

from typing import Any

from dagster import AssetExecutionContext, AssetObservation

from ..core.cassettes.cache import CachingExtractor

FAILED_STEP = "failed_step"  # the metadata flag the driver's summary counts these by


def extractor_spent(
    extractor: CachingExtractor, *, calls: str = "extraction_calls", prefix: str = ""
) -> dict[str, int]:
    """Where a step's answers came from, and what its calls cost in requests: the extraction
    step's metadata names, or the bench's (`calls="bench_calls", prefix="bench_"`)."""
    return {
        calls: extractor.calls,
        f"{prefix}llm_requests": extractor.requests,
        f"{prefix}cache_hits": extractor.hits,
        f"{prefix}replayed": extractor.replayed,
        f"{prefix}cassette_misses": extractor.misses,
        # Stopped mid-flight: the requests such a call sent are not in llm_requests.
        f"{prefix}calls_interrupted": extractor.interrupted,
    }


def spend_before_failure(
    context: AssetExecutionContext, counts: dict[str, Any]
) -> AssetObservation:
    """The step's counts (the keys its materialisation carries) on its asset and partition."""
    return AssetObservation(
        asset_key=context.asset_key,
        partition=context.partition_key if context.has_partition_key else None,
        metadata={FAILED_STEP: True, **counts},
    )
