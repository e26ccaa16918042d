"""The benchmarks, each a command run by its path (`python benchmarks/NAME.py`, docs/benchmarks.md)
and a module the tests import (`benchmarks.NAME`; the compile matrix's parts `benchmarks.matrix`).
Both need the repository root and scripts/ on sys.path: pytest's `pythonpath` puts them there, and a
command run by its path puts them there itself before importing either."""
