"""A run's life inside each training process: a stop on a signal with everything saved,
crash-safe checkpoints, and what the launcher and the trainer share (the stop record).
"""
