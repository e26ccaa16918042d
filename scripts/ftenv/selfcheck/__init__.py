"""Self-check wing (`ftenv selfcheck`): a few real Fun-ASR-Nano fine-tune steps on a tiny model,
timed on new and seen batch shapes, and judged PASS/FAIL/INCONCLUSIVE.

selfcheck (the command) runs one mode (mode_inprocess, mode_recipe, mode_compile) over the shared
loop and schedule, has verdict judge what it measured and render print it; tinymodel builds the
offline model and data. May import every wing below it; only the CLI imports it.
"""
