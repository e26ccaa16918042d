"""The opt-in fast path, put on the model in the trainer's process (ftenv.trainer.funasr_entry) and
in the benchmark: the compiled decoder (FunASR PR #3705's path, and regional), the compiled audio
side, bucketing, and `parts`, which applies what FTENV_COMPILE and FTENV_BUCKETS ask for. The
launcher side (flags, environment, caches) is ftenv.train.speed_options and compile_cache."""
