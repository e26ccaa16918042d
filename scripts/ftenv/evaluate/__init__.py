"""Evaluating, comparing and handing over fine-tuned models."""
