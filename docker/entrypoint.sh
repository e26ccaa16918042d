#!/bin/sh
# The image's entrypoint, run by tini (PID 1 under Docker, podman and Kubernetes; not under
# enroot, where tini warns so). It prints the ftenv report to stderr, then becomes
# the user's command with `exec`: the command's arguments, output, exit code and signals are its
# own. FTENV_REPORT=0 skips the report; a failing or hanging report never blocks the command.
# FTENV_REPORT_SHOWN=1 tells `ftenv finetune` and `ftenv selfcheck`, which print the report
# themselves when a launcher skips the entrypoint (pyxis by default, `apptainer exec`), that it
# has been shown in this container.
set -u

if [ "$#" -eq 0 ]; then
    set -- bash
fi

if [ "${FTENV_REPORT:-1}" != "0" ] && ! { [ "$1" = "ftenv" ] && [ "${2:-}" = "report" ]; }; then
    timeout -k 5 "${FTENV_REPORT_TIMEOUT:-60}" ftenv report </dev/null >&2 \
        || echo "ftenv: the start-up report failed (exit $?); running your command anyway" >&2
    FTENV_REPORT_SHOWN=1
    export FTENV_REPORT_SHOWN
fi

exec "$@"
