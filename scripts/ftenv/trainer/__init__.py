"""Trainer wing: what runs inside each training process (`python -m ftenv.trainer.funasr_entry`),
so that FunASR's own trainer gets the run's life, the fast path and the data counts without touching
site-packages. Below ftenv.launch: the launcher imports it, never the reverse.
"""

#: The trainer entry torchrun starts in every training process (`python -m`), named once for
#: `ftenv finetune` and `ftenv selfcheck --recipe`.
ENTRY_MODULE = "ftenv.trainer.funasr_entry"
