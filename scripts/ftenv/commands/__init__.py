"""The `ftenv` commands, one module each: its parser and a thin run that turns the parsed arguments
into the typed options of the wing that does the work, so no argparse Namespace reaches the logic."""
