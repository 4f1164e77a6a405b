"""The exact-match benchmark: a hand-written corpus of short cases, each isolating one failure
mode of schema-guided extraction, scored by counts with no model in the loop.

`corpus` loads and checks the cases, `slice` cuts a wide schema down to a budget, `values`
coerces property values by their declared type, `metrics` counts per episode, and `runner`
runs an extractor over the corpus and writes the run report `core.compare` reads.
"""
