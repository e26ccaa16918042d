"""The mark that begins every line the watchdog adds to a log, in one place below every module that
writes one: users search their logs for it, and the tests strip it to compare the rest byte for
byte."""

PREFIX = "[ftenv-watch]"
#: The explanation under a slow step's line.
INDENT = f"{PREFIX}   "
