"""Claim extraction and its golden-set regression gate (pure Python, no Dagster).

`prompt` (our prompt, schema, version, fingerprint), `extractor` (one call per text and the
validation every claim passes), `golden` (the strict loader), `recordings` and `runner` (replay
and live recording), `scoring` (span-IoU matching, micro P/R/F1) and `gate` (baseline and states).
"""
