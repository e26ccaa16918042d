"""Training wing: the fine-tune launcher (`ftenv finetune`: inputs, overrides, the cluster
environment, the launch plan, the faster-training options and their caches), and what the trainer
process loads (`python -m ftenv.train.funasr_entry`: the fast path in fastpath/, the CPU shim, the
test stall).

May import stack, report and steps; the self-check and the CLI import it.
"""
