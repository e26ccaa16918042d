"""The `ftenv` command line stays cheap to start: heavy imports belong inside each command's run()."""

import subprocess
import sys

HEAVY = ("torch", "transformers", "funasr", "numpy", "matplotlib")


def test_building_the_parser_imports_nothing_heavy():
    code = (
        "import sys\n"
        "from ftenv.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout


def test_unknown_command_is_a_usage_error_not_a_traceback():
    r = subprocess.run([sys.executable, "-m", "ftenv.cli", "nope"], capture_output=True, text=True)
    assert r.returncode == 2 and "invalid choice" in r.stderr and "Traceback" not in r.stderr
