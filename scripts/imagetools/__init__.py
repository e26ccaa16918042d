"""Host-side tooling for the images, never installed in them, by job: release/ (bake file, release
checks, scans, generated docs), local/ (build and run on this machine), gpukit/ (the wheel kit and
checks for a lent GPU machine); what two jobs share (tags, build args and labels, the bake file, the
locks) sits here at the top.

Imports: ftenv.stack and the standard library; the GPU kit also ftenv.attention (the attention rule
it checks a GPU against), and release.generated also ftenv.report (the docs' sample report is the
report's own rendering); never the wings above. tests/test_architecture.py checks it.
"""
