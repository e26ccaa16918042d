"""Step-time wing: FunASR's per-step log lines, step statistics and verdicts, slow-step hints, the
watchdog, the step timer for custom loops and the offline log analyzer.

Modules, lowest first: thresholds (every threshold and default), step (the Step type, the
causes' names), detector (what a slow step is put down to, DDP waits, live detection), fixes (what
to do, in words), apart (start-up steps and pauses between steps, in words), stats (summary and
verdict; the wing's entry point), funasr_log (parsing),
messages (the hint's words), watcher (the live Watcher: when to print a hint), silence (when a
run that prints nothing is named and ended), crash (the last word after a failure), hang (the
stacks of a silent run, stopping it), options (shared CLI types), watch, timer, log_context (a
saved log's start-up report and traceback), analyze.

May import ftenv.report and ftenv.stack; never ftenv.train or ftenv.selfcheck.
"""
