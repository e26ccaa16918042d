"""The start-up report's text and JSON: the GPU, the stack and which attention backend a padded
Fun-ASR-Nano batch will use. The entrypoint prints it before every command, so it must be quick
and never fail.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ftenv import text, variables
from ftenv.attention import facts as facts_mod
from ftenv.attention import sdpa
from ftenv.report import network
from ftenv.stack import versions

SHM_DOCKER_DEFAULT = 64 * 2**20


def supported_sm() -> set[tuple[int, int]]:
    """The GPUs the image is built and checked for, from versions.toml ("sm_100" -> (10, 0))."""
    try:
        names = versions.load().image["supported_sm"]
    except (SystemExit, KeyError, OSError, ValueError):
        return set()  # unknown: no warning rather than a wrong one
    return {(int(n[3:-1]), int(n[-1])) for n in names}


def _variant_for_driver(driver_cuda: int) -> str:
    """', or use the cu128 image (driver R570 or later)' for the variant of versions.toml that this
    driver runs; nothing when none does or the file cannot be read."""
    try:
        fits = versions.load().for_driver(driver_cuda)
    except (SystemExit, KeyError, OSError, ValueError):
        return ""
    return f", or use the {fits[0].name} image (driver R{fits[0].min_driver} or later)" if fits else ""


@dataclass
class Assessment:
    deprioritized: sdpa.DeprioritizedSetting
    exposure: sdpa.Exposure
    notes: list[str] = field(default_factory=list)  # WARNING/ERROR/NOTE lines, most severe first


def _driver_notes(f: facts_mod.Facts) -> list[str]:
    if not f.libcuda_found:
        return [
            "WARNING: The NVIDIA driver was not detected (no libcuda.so.1): GPU functionality will "
            "not be available. Start the container with GPUs: `docker run --gpus all`, Kubernetes "
            "`resources.limits: nvidia.com/gpu`, Apptainer `--nv`."
        ]
    notes = []
    if f.driver_cuda is not None and f.torch_cuda and f.driver_cuda < versions.cuda_int(f.torch_cuda):
        have = versions.cuda_name(f.driver_cuda)
        need = f"R{f.min_driver} or later" if f.min_driver else "a newer driver"
        notes.append(
            f"ERROR: This image's torch is built for CUDA {f.torch_cuda} and needs NVIDIA driver "
            f"{need}; driver {f.driver_version or 'unknown'} supports CUDA {have} only. Update the "
            f"driver{_variant_for_driver(f.driver_cuda)}."
        )
    if f.libcuda_found and not f.gpus and not notes:
        notes.append(
            "WARNING: a driver is present but torch sees no GPU: check NVIDIA_VISIBLE_DEVICES / "
            "CUDA_VISIBLE_DEVICES and the problems listed by `ftenv report --json`."
        )
    return notes


def assess(f: facts_mod.Facts) -> Assessment:
    deprioritized = sdpa.interpret_deprioritized(f.stack.deprioritized_raw)
    exposure = sdpa.exposure(
        gpus=[g.sm for g in f.gpus],
        torch_version=f.stack.torch_version,
        cudnn_version=f.stack.cudnn_version,
        setting=deprioritized,
        live_order=f.live_order,
        padded_choice=f.padded_choice,
    )
    notes = _driver_notes(f)
    if deprioritized.state == "ignored":
        notes.append(
            f"WARNING: {variables.SDPA_DEPRIORITIZED}={deprioritized.raw!r}: {deprioritized.meaning}."
        )
    supported = supported_sm() if f.gpus else set()
    for gpu in f.gpus:
        if supported and gpu.sm not in supported:
            names = ", ".join(sdpa.sm_name(sm) for sm in sorted(supported))
            notes.append(
                f"WARNING: GPU {gpu.index} ({gpu.name}, {sdpa.sm_name(gpu.sm)}) is outside what this "
                f"image is built and checked for ({names}); it may work, unverified."
            )
    if f.shm_bytes is not None and f.shm_bytes <= SHM_DOCKER_DEFAULT:
        notes.append(
            f"NOTE: /dev/shm is {f.shm_bytes // 2**20} MiB (Docker's default); DataLoader workers "
            "may die with 'Bus error'. Use `docker run --ipc=host` or `--shm-size=16g` (Kubernetes: "
            "an emptyDir with medium: Memory mounted at /dev/shm)."
        )
    return Assessment(deprioritized, exposure, notes)


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB"


#: Hex digits of the commit in the immutable `<stack>-<commit>` tag (docs/releasing.md).
COMMIT_TAG_LEN = 12


def build_line(environ) -> str | None:
    """Which build of the image this is, so that the nodes or pods of one job can be compared: the
    build's immutable `<stack>-<commit>` tag, from the commit the image sets. The digest itself is
    not visible from inside a container (it is a hash over the image's own config), nor passed in by
    enroot, Apptainer or Kubernetes; the line says where to read it."""
    ref, rev = variables.read(variables.IMAGE, environ), variables.read(variables.IMAGE_REVISION, environ)
    if not ref or rev is None:
        return None
    where = (
        "digest: not visible inside a container (`docker image inspect --format '{{.RepoDigests}}'`; "
        "Kubernetes: the pod's status.containerStatuses[].imageID)"
    )
    if len(rev) < COMMIT_TAG_LEN or any(c not in "0123456789abcdef" for c in rev.lower()):
        return f"build   commit {rev} (a local build: no immutable tag); {where}"
    return f"build   {ref}-{rev[:COMMIT_TAG_LEN].lower()} (this build's immutable tag; commit {rev}); {where}"


def render_text(
    f: facts_mod.Facts,
    a: Assessment,
    compile_line: str,
    network_lines: list[str] | None = None,
    environ=None,
) -> str:
    """The report's text; `compile_line` is the faster-training line, worked out by the caller (the
    train wing owns those settings, and this wing may not import it); `network_lines` the network's
    (ftenv.report.network), last, after the attention verdict and its notes; `environ` the
    image's variables the build line reads (this process's unless given: the docs' sample)."""
    driver = f.driver_version or ("unknown" if f.libcuda_found else "not detected")
    if f.driver_cuda:
        driver += f" (CUDA {versions.cuda_name(f.driver_cuda)})"
    lines = [
        f"== ftenv report: {f.image or 'image unknown (not run from an ftenv image)'} ==",
        f"stack   torch {f.stack.torch_version or 'unknown'} (CUDA {f.torch_cuda or 'none'}), "
        f"cuDNN {sdpa.cudnn_name(f.stack.cudnn_version)}, transformers {f.transformers_version or 'absent'}, "
        f"funasr {f.funasr_version or 'absent'}",
        f"driver  {driver}",
    ]
    if standin := variables.read(variables.STANDIN_BASE):
        lines.insert(1, f"base    built on a stand-in base ({standin}): for tests, not for training")
    if build := build_line(environ):
        lines.insert(1, build)
    for g in f.gpus:
        lines.append(f"GPU {g.index}   {g.name}, {sdpa.sm_name(g.sm)}, {_gib(g.memory_bytes)}")
    if not f.gpus:
        lines.append("GPU     none visible: the report and the self-check work; training needs a GPU")
    lines.append(
        f"SDPA    {text.assignment(variables.SDPA_DEPRIORITIZED, a.deprioritized.raw)}: "
        f"{sdpa.setting_meaning(f.stack.torch_version, a.deprioritized)}"
    )
    if f.gpus:
        order = " > ".join(sdpa.backend_name(b) for b in f.live_order) if f.live_order else "unknown"
        lines.append(
            f"        live order: {order}; padded-mask bf16 attention (head_dim "
            f"{facts_mod.LLM_HEAD_DIM}) takes: {sdpa.backend_name(f.padded_choice)}"
        )
    lines.append(compile_line)
    lines.append(f"verdict {a.exposure.line}")
    if a.exposure.risk:
        lines.append(f"        also: {a.exposure.risk}")
    lines.extend(a.notes)
    lines.extend(network_lines or ())
    return "\n".join(lines)


def render_json(f: facts_mod.Facts, a: Assessment, network: dict | None = None) -> str:
    return json.dumps(
        {
            **({"network": network} if network is not None else {}),
            "facts": f.to_dict(),
            "env": {
                "raw": a.deprioritized.raw,
                "state": a.deprioritized.state,
                "meaning": a.deprioritized.meaning,
            },
            "live_order_names": [sdpa.backend_name(b) for b in f.live_order or []],
            "padded_choice_name": sdpa.backend_name(f.padded_choice),
            "verdict": {
                "level": a.exposure.level,
                "reason": a.exposure.reason,
                "fix": a.exposure.fix,
                "risk": a.exposure.risk,
            },
            "notes": a.notes,
        },
        indent=2,
    )


def report_text(compile_line: str, nodes: int | None, launcher: str | None, live: bool = True) -> str:
    """The report's text block, read now: what `ftenv report` prints and what a command that uses
    the GPU anyway shows in process (ftenv.report.startup)."""
    f = facts_mod.collect(live=live)
    lines = network.render_lines(network.collect(nodes, launcher))
    return render_text(f, assess(f), compile_line, lines)
