"""Step-time wing: FunASR's per-step log lines, step statistics and verdicts, slow-step hints, the
watchdog, the step timer for custom loops and the offline log analyzer, so that a fine-tuner sees
why a step was slow without a profiler. Each name is imported from the module that owns it.
"""
