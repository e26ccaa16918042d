"""Training wing: `ftenv finetune` works out and starts upstream's recipe (launcher side), and
`python -m ftenv.train.funasr_entry` adds what every training process needs (trainer side).
"""
