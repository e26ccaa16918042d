"""ftenv: the tools inside the Fun-ASR-Nano GPU images (report, checks, watchdog)."""

__version__ = "0.1.0"
