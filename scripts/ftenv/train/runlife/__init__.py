"""A run's life: a stop on a signal with everything saved, crash-safe checkpoints, and a resume that
says what it does, because preemption and crashes are normal on shared clusters.
"""
