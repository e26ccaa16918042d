"""Did the fine-tune help: transcripts scored the way the field reports mixed Chinese/English error
rates (CJK per character, Latin-script words per word, after one printed normalization), and a
summary table of models, best first, against the base model; then the chosen checkpoint handed over
as a model folder with its card (`ftenv export`). The wing sits above `train` so that decoding can
load what a run wrote, and below `selfcheck` and the commands."""
