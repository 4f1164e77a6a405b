"""LLM-as-judge: reference-mode judged F1, blind pairwise judging, and the mandatory cache."""
