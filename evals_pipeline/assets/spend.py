"""What a failed step spent: its call counts survive the failure, as an asset observation.

A step that fails after paid calls (a full disk while recording, SIGTERM, a judge outage)
yields no materialisation, so its counts would be lost and the driver's summary would say it
made no call. The asset yields this observation before it re-raises: an event yielded is
logged at once, where one passed to `context.log_event` waits for the next output, which a
failing step never yields.

    try:
        table = extraction_table(...)
    except BaseException:
        yield spend_before_failure(context, _spent(extractor))
        raise
"""

from __future__ import annotations

from typing import Any

from dagster import AssetExecutionContext, AssetObservation

FAILED_STEP = "failed_step"  # the metadata flag the driver's summary counts these by


def spend_before_failure(
    context: AssetExecutionContext, counts: dict[str, Any]
) -> AssetObservation:
    """The step's counts (the keys its materialisation carries) on its asset and partition."""
    return AssetObservation(
        asset_key=context.asset_key,
        partition=context.partition_key if context.has_partition_key else None,
        metadata={FAILED_STEP: True, **counts},
    )
