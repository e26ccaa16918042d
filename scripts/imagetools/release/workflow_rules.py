"""Static rules for the release workflow: the review findings a static check can catch.

Each rule names what it guards; docs/releasing.md ("What is checked without GitHub") lists them and
says what only a run on GitHub can show. The workflow is read as YAML (PyYAML, in the lock).
"""

from __future__ import annotations

import re
from pathlib import Path

RELEASE = "release.yml"
#: Big preinstalled folders of the ubuntu-24.04 hosted image that the build job removes: two ~6 GB
#: platforms and BuildKit's cache need the room (docs/releasing.md, "Disk space").
DISK_HOGS = (
    "/usr/share/dotnet",
    "/usr/local/lib/android",
    "/opt/ghc",
    "/usr/local/.ghcup",
    "/usr/share/swift",
    "/opt/hostedtoolcache",
)
#: The oldest cosign that reads the bundle format cosign v3 writes.
MIN_COSIGN_MAJOR = 3
_DIGEST = re.compile(r"@sha256:[0-9a-f]{64}\b")
_NEEDS_RESULT = re.compile(r"needs\.([A-Za-z0-9_-]+)\.result\s*==\s*'(\w+)'")


def workflow_files(directory: Path) -> list[Path]:
    """The workflows GitHub reads from the folder: its .yml and .yaml files."""
    return sorted([*directory.glob("*.yml"), *directory.glob("*.yaml")])


def _load(path: Path) -> dict:
    import yaml  # PyYAML, from the lock; imported here so that `release bake` needs no more than Python

    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise ValueError(f"not YAML: {e}") from e
    if not isinstance(data, dict):
        raise ValueError("not a workflow")  # check() prefixes the file name
    # YAML 1.1 reads the key `on` as True.
    data["on"] = data.pop(True, data.get("on", {}))
    return data


def _steps(job: dict) -> list[dict]:
    return [s for s in job.get("steps", []) if isinstance(s, dict)]


def _uses(step: dict, action: str) -> bool:
    return str(step.get("uses", "")).split("@")[0] == action


def _needs(job: dict) -> list[str]:
    needs = job.get("needs", [])
    return [needs] if isinstance(needs, str) else list(needs)


def _expand_env(text: str, env: dict) -> str:
    """`${{ env.NAME }}` replaced by the workflow-level value."""
    return re.sub(r"\$\{\{\s*env\.(\w+)\s*\}\}", lambda m: str(env.get(m[1], "")), text)


def _scripts(jobs: dict) -> list[tuple[str, str]]:
    return [(name, str(s.get("run", ""))) for name, job in jobs.items() for s in _steps(job)]


def rules_release(wf: dict) -> list[str]:
    """The rules for release.yml; `wf` is the parsed workflow."""
    problems = []
    jobs = wf.get("jobs", {})
    promote = jobs.get("promote")
    if promote is None:
        return ["no `promote` job"]
    cond = str(promote.get("if", ""))
    if "always()" in cond or "!cancelled()" not in cond:
        problems.append("promote: its `if` must use `!cancelled()`, not `always()`")
    accepted = _NEEDS_RESULT.findall(cond)
    if ("gpu-smoke", "success") not in accepted:
        problems.append("promote: must require `needs.gpu-smoke.result == 'success'`")
    if ("gpu-smoke", "skipped") in accepted:
        deciders = [
            j for j, r in accepted if r == "success" and j != "gpu-smoke" and "environment" in jobs.get(j, {})
        ]
        if not deciders or not all(d in _needs(promote) for d in deciders):
            problems.append(
                "promote: accepts a skipped GPU smoke test without a recorded decision "
                "(a job with a protected `environment:` that promote needs and requires)"
            )
    for j in ("scan",):
        if j not in _needs(promote) or (j, "success") not in accepted:
            problems.append(f"promote: must need and require the `{j}` job")
    # The "already built?" query: an error other than not-found must fail the job, never rebuild.
    for name, script in _scripts(jobs):
        for line in script.splitlines():
            if "imagetools inspect" in line and "2>/dev/null" in line.replace(" ", ""):
                problems.append(f"{name}: `imagetools inspect ... 2>/dev/null` hides registry errors")
    if not any("merge-base --is-ancestor" in s for _, s in _scripts(jobs)):
        problems.append("no step checks that a release tag's commit is on main (merge-base --is-ancestor)")
    build = jobs.get("build", {})
    removed = {w.rstrip("/") for s in _steps(build) for w in str(s.get("run", "")).split()}
    missing = [p for p in DISK_HOGS if p not in removed]
    if missing:
        problems.append(f"build: disk cleanup misses {', '.join(missing)}")
    env = wf.get("env", {})
    for name, job in jobs.items():
        for s in _steps(job):
            w = {k: _expand_env(str(val), env) for k, val in (s.get("with", {}) or {}).items()}
            if _uses(s, "sigstore/cosign-installer"):
                m = re.match(r"^v(\d+)\.", str(w.get("cosign-release", "")))
                if not m or int(m[1]) < MIN_COSIGN_MAJOR:
                    want = f"v{MIN_COSIGN_MAJOR}.x"
                    problems.append(f"{name}: cosign-installer needs `cosign-release: {want}` or newer")
            if _uses(s, "docker/setup-qemu-action") and not _DIGEST.search(str(w.get("image", ""))):
                problems.append(f"{name}: setup-qemu-action's binfmt `image` is not pinned by digest")
            if _uses(s, "docker/setup-buildx-action") and not _DIGEST.search(w.get("driver-opts", "")):
                problems.append(f"{name}: setup-buildx-action's BuildKit image is not pinned by digest")
    scans = [
        (name, s.get("with", {}) or {})
        for name, job in jobs.items()
        for s in _steps(job)
        if _uses(s, "anchore/scan-action")
    ]
    gating = [
        w
        for _, w in scans
        if str(w.get("fail-build")).lower() == "true"
        and str(w.get("severity-cutoff")) == "critical"
        and str(w.get("only-fixed")).lower() == "true"
        and w.get("sbom")
    ]
    for what in ("image", "lock"):
        if not any(what in str(w.get("sbom")) for w in gating):
            problems.append(
                f"no gating scan of the {what} SBOM (anchore/scan-action with sbom, fail-build: true, "
                "severity-cutoff: critical, only-fixed: true)"
            )
    notes = " ".join(s for n, s in _scripts(jobs) if n == "github-release")
    for phrase in ("GPU smoke:", "arm64"):
        if phrase not in notes:
            problems.append(f"github-release: the notes do not say `{phrase}`")
    return problems


def rule_no_self_hosted_for_prs(name: str, wf: dict) -> list[str]:
    """A self-hosted runner must not be reachable from pull requests (forks run their own code)."""
    on = wf.get("on", {})
    events = [on] if isinstance(on, str) else list(on)
    if not {"pull_request", "pull_request_target"} & set(events):
        return []
    return [
        f"{name}: job {j} runs on a self-hosted runner in a workflow that pull requests trigger"
        for j, job in wf.get("jobs", {}).items()
        if "self-hosted" in str(job.get("runs-on", ""))
    ]


def check(directory: Path) -> list[str]:
    if not (directory / RELEASE).is_file():
        return [f"{directory / RELEASE} missing"]
    problems = []
    for path in workflow_files(directory):
        try:
            wf = _load(path)
        except ValueError as e:
            problems.append(f"{path.name}: {e}")
            continue
        problems += rule_no_self_hosted_for_prs(path.name, wf)
        if path.name == RELEASE:
            problems += [f"{RELEASE}: {p}" for p in rules_release(wf)]
    return problems
