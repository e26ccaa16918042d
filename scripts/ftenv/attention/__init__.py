"""Attention wing: how torch picks the attention backend (the rule of FunASR issue #3704), the facts
of the GPU and stack it is decided on, the settings a running process has (read from outside it),
and `ftenv probe`'s measurement."""
