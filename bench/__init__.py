"""Benchmarks: every figure is a ratio against a raw baseline measured in the same run."""
