#!/bin/sh
# Remove from a venv what nothing loads at run time, in the same layer that installed it (a later
# `rm` would only hide the files under a whiteout; the bytes would still ship).
#
# - Test suites that packages ship inside site-packages (`tests/` folders: scipy, sympy, sklearn,
#   networkx, numpy, ...): nothing outside a test run imports them. torch's own folders are kept
#   whole: torch.testing and Inductor import helpers from under torch/.
# Kept on purpose: every header (torch/include, triton/backends/*/include, nvidia/*/include), which
# Inductor and Triton compile against; the .pyc files pip compiled at install (the venv is
# root-owned, so a non-root user could not write them and every start would recompile).
set -eu
venv=${1:?usage: slim-venv.sh VENV}
for sp in "$venv"/lib/python3*/site-packages; do
  find "$sp" -mindepth 1 -type d -name tests -not -path "$sp/torch/*" -prune -exec rm -rf {} +
done
