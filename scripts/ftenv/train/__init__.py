"""Training wing: the fine-tune launcher (`ftenv finetune`), the cluster environment it reads, and
what the trainer process loads (`python -m ftenv.train.funasr_entry`: the compiled decoder, the CPU
shim, the test stall).

May import stack, report and steps; the self-check and the CLI import it.
"""
