"""The data wing: training manifests for Fun-ASR-Nano (upstream's ChatML JSONL) prepared from the
lists fine-tuners have, checked line by line before the GPUs start, and FunASR's silent data
losses counted at run time. It may import stack, report and steps (the run-time counter prints the
line the watchdog reads, whose format lives in steps), never train or selfcheck."""
