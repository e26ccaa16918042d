"""Training wing: the fine-tune launcher, cluster environment detection, the tiny offline model
and the self-check.

May import every other wing; nothing but the CLI imports it.
"""
