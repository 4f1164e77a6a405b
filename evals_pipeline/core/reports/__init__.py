"""Eval reports: per-mode summaries of every backend, a cross-mode matrix, Markdown and a plot.

Everything here is pure data in, pure data (or files) out: JSON-serialisable dicts built from
the per-backend extraction tables, with no knowledge of the orchestrator that schedules them.
"""
