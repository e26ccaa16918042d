"""The wheel kit for a lent GPU machine that has torch but not FunASR, the checks run there, and their
results (docs/gpu-results.md)."""
