"""Report wing: the start-up report of the GPU, the stack and the attention order, rendered at
container start, on demand (`ftenv report`) and read back from logs.
"""
