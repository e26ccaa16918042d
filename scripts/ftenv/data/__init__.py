"""The data wing: Fun-ASR-Nano training manifests (upstream's ChatML JSONL) prepared, checked line
by line before the GPUs start, and FunASR's silent data losses counted at run time.
"""
