"""Host-side tooling for the images, never installed in them, by job: release/ (bake file, release
checks, scans, generated docs), local/ (build and run on this machine), gpukit/ (the wheel kit and
checks for a lent GPU machine), fixture/ (test fixtures built from public packages); what two jobs
share (tags, build args and labels, the bake file, the locks) sits here at the top.

Of ftenv it imports ftenv.stack and the shared floor-0 modules ftenv.variables and ftenv.outcome
(the names of the variables and exit codes the image reads and gives); the GPU kit also
ftenv.attention (the attention rule it checks a GPU against), and release.generated also
ftenv.attention, ftenv.report and ftenv.trainer's compile setting (the docs' sample report is the
report's own rendering, compile line included); never the others. A job's subpackage imports the top
and itself, never another job (tests/test_architecture.py checks both). The top and local/ need only
the standard library, as `make run` on a stock python3 does; release/ and gpukit/ run from the venv.
"""

from pathlib import Path

#: The checkout these tools read and write (versions.toml, docker/, docs/): two folders above.
ROOT = Path(__file__).resolve().parents[2]
