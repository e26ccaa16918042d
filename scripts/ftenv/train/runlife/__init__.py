"""A run's life: stop on a signal with everything saved, crash-safe checkpoints, and a resume that
says what it does.

The launcher side (`ftenv finetune`, before torchrun): folder.py reads the output folder (fresh,
resuming from which file at which epoch and step, finished; a checkpoint that does not load falls
back to the newest one that does) and checks the free space; torchrun.py is torchrun in-process with
the stop's exit code. The trainer side (`python -m ftenv.train.funasr_entry`, every rank): install()
in hooks.py wraps FunASR's Trainer at run time (signals.py: the stop at a step boundary;
atomic.py: every checkpoint written to a temporary name, synced and renamed). record.py is what both
sides share: the file names and the stop record.
"""
