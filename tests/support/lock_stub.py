"""Stands in for `uv pip compile` in tests/imagetools/release/test_version_bump.py, which has no
network: it reads the top-level pins on stdin and rewrites those pins in the lock named by `-o`,
keeping everything else (hashes included) as it was. Never used to make a real lock."""

import re
import sys
from pathlib import Path

lock = Path(sys.argv[sys.argv.index("-o") + 1])
text = lock.read_text()
for line in sys.stdin.read().split():
    name, _, version = line.partition("==")
    text = re.sub(rf"(?im)^{re.escape(name)}==[^\s;\\]+", f"{name}=={version}", text)
lock.write_text(text)
