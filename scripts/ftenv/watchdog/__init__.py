"""Step-time wing: why a training step was slow, seen without a profiler, from FunASR's log or a
custom loop. Each name is imported from the module that owns it.
"""
