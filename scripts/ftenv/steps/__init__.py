"""Step-time wing: FunASR's per-step log lines, step statistics and verdicts, slow-step hints, the
watchdog, the step timer for custom loops and the offline log analyzer.

May import ftenv.report and ftenv.build; never ftenv.train.
"""
