"""Report wing: the start-up report of the GPU, the stack and the attention order (ftenv.attention),
rendered once per node at container start, on demand (`ftenv report`) and read back from logs."""
