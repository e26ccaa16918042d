# shellcheck shell=sh
# /etc/profile.d/ftenv-venv.sh: the image's venv first on PATH in login shells too. A login shell
# sources /etc/profile, which resets PATH on some bases (Debian's does, Ubuntu's does not), and
# enroot runs every command through a login shell by default (ENROOT_LOGIN_SHELL): without this,
# `ftenv` and the venv's python3 are not found there. VIRTUAL_ENV is the image's ENV.
if [ -n "${VIRTUAL_ENV:-}" ]; then
    case ":${PATH}:" in
        *":${VIRTUAL_ENV}/bin:"*) ;;
        *) PATH="${VIRTUAL_ENV}/bin:${PATH}" ;;
    esac
    export PATH
fi
