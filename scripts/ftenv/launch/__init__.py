"""Launch wing: what runs before torchrun, so that `ftenv finetune` refuses a bad run once, not on
every rank: the inputs, the recipe, the nodes, the output folder, the torchrun command and wrapper.
What runs inside each training process is ftenv.trainer's.
"""
