"""Scoring extraction output: comparing one backend's graphs with another's, chunk by chunk."""
