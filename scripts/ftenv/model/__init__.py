"""A Fun-ASR-Nano model as every command reads it: the model folder (its files, the tokenizer, its
relative paths), the checkpoints a run writes, their weights and their fit on the model."""
