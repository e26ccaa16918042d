"""Start-up wing: facts about the GPU and the stack, the live attention order, the SDPA rule and
the report block printed at container start.

May import ftenv.stack; never the wings above it (steps, train, selfcheck).
"""
