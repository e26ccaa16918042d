"""A run's life around torchrun: the output folder read and made ready, the space its checkpoints
need, and torchrun's exit on a stop, because preemption and crashes are normal on shared clusters.
"""
