"""Trainer wing: what runs inside each training process (`python -m ftenv.trainer.funasr_entry`),
so that FunASR's own trainer gets the run's life, the fast path and the data counts without touching
site-packages. Below ftenv.train: the launcher imports it, never the reverse.
"""
