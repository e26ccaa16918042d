"""The compile matrix (benchmarks/compile_speedup.py) in its parts: the arms with their gate and
ranking, the model and batches, what a step's ATen ops and host syncs are (stepcount, also
benchmarks/dispatch_proxy.py's), how a step is measured, the runs, the table."""
