"""The opt-in fast path, put on the model in the trainer's process (ftenv.trainer.funasr_entry) and in
the benchmark; the launcher side (flags, environment, caches) is ftenv.launch.speed_options."""
