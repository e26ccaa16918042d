"""Self-check wing (`ftenv selfcheck`): a few real Fun-ASR-Nano fine-tune steps on a tiny model, timed
on new and seen batch shapes and judged PASS/FAIL/INCONCLUSIVE, so that a fine-tuner sees before a
long run whether new shapes stall. May import every wing below it; only the commands import it.
"""
