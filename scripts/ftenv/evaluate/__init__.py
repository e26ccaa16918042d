"""`ftenv eval` and `ftenv transcribe`: checkpoints of a run loaded, test sets decoded and scored."""
