"""Test-support code shared by the evals_pipeline test suite."""
