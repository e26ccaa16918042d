"""The Kubernetes manifests of docs/examples/, read and validated offline: Job and PodTemplateSpec
against kubernetes-validate's strict schemas, PyTorchJob against tests/schemas/ (written from
kubeflow/training-operator v1.9.0's CRD and webhook), and the restricted Pod Security Standard's
checks that apply to them. Users apply these files as they are; a field the API server rejects is
found here first."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import kubernetes_validate
import referencing
import yaml

from support import ROOT

EXAMPLES = ROOT / "docs/examples"
#: The Kubernetes version whose schemas kubernetes-validate checks against.
K8S_VERSION = "1.37"


def load_yaml(name: str) -> list[dict]:
    """The documents of docs/examples/kubernetes/NAME."""
    return [d for d in yaml.safe_load_all((EXAMPLES / "kubernetes" / name).read_text()) if d]


def k8s_schema(name: str) -> tuple[dict, referencing.Registry]:
    """One of kubernetes-validate's strict schemas, with the registry that resolves its references."""
    base = Path(kubernetes_validate.__file__).parent / f"kubernetes-json-schema/v{K8S_VERSION}.0-local-strict"
    schema = json.loads((base / name).read_text())
    definitions = json.loads((base / "_definitions.json").read_text())
    registry = referencing.Registry().with_resources(
        [
            ("/api/_definitions.json", referencing.Resource.from_contents(definitions)),
        ]
    )
    return schema, registry


def validate_job(doc: dict) -> None:
    """Raise if the Job is not valid (unknown fields included)."""
    kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def validate_pytorchjob(doc: dict) -> None:
    """Raise if the PyTorchJob, or the pod template of one of its replicas, is not valid."""
    outer = json.loads((ROOT / "tests/schemas/pytorchjob-kubeflow-v1.schema.json").read_text())
    jsonschema.Draft202012Validator(outer).validate(doc)
    pod_schema, registry = k8s_schema("podtemplatespec-v1.json")
    validator = jsonschema.Draft202012Validator(pod_schema, registry=registry)
    for replica in doc["spec"]["pytorchReplicaSpecs"].values():
        validator.validate(replica["template"])


def pod_specs(doc: dict) -> list[dict]:
    """The pod specs of a Job (one) or a PyTorchJob (one per replica type)."""
    if doc["kind"] == "Job":
        return [doc["spec"]["template"]["spec"]]
    return [r["template"]["spec"] for r in doc["spec"]["pytorchReplicaSpecs"].values()]


def first_container(doc: dict) -> dict:
    """The first container of the first pod spec: the trainer."""
    return pod_specs(doc)[0]["containers"][0]


def set_at(path):
    """A mutation that sets doc[path...] (the last item is the value)."""

    def mutate(doc):
        target = doc
        for key in path[:-2]:
            target = target[key]
        target[path[-2]] = path[-1]

    return mutate


#: The volume types the restricted Pod Security Standard allows (kubernetes.io/docs/concepts/security/
#: pod-security-standards, "Volume Types").
RESTRICTED_VOLUMES = {
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
    "persistentVolumeClaim", "projected", "secret",
}  # fmt: skip


def restricted_violations(spec: dict) -> list[str]:
    """What in a pod spec breaks the restricted Pod Security Standard (its checks that apply here)."""
    bad = []
    pod = spec.get("securityContext", {})
    for v in spec.get("volumes", []):
        kinds = set(v) - {"name"}
        if not kinds <= RESTRICTED_VOLUMES:
            bad.append(f"volume {v['name']}: {kinds - RESTRICTED_VOLUMES}")
    for c in spec.get("initContainers", []) + spec["containers"]:
        sc = c.get("securityContext", {})
        if not sc.get("runAsNonRoot", pod.get("runAsNonRoot")):
            bad.append(f"{c['name']}: runAsNonRoot is not true")
        if sc.get("runAsUser", pod.get("runAsUser")) == 0:
            bad.append(f"{c['name']}: runAsUser 0")
        if sc.get("allowPrivilegeEscalation") is not False:
            bad.append(f"{c['name']}: allowPrivilegeEscalation is not false")
        caps = sc.get("capabilities", {})
        if caps.get("drop") != ["ALL"] or set(caps.get("add", [])) - {"NET_BIND_SERVICE"}:
            bad.append(f"{c['name']}: capabilities must drop ALL (and add at most NET_BIND_SERVICE)")
        seccomp = sc.get("seccompProfile", pod.get("seccompProfile", {})).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            bad.append(f"{c['name']}: seccompProfile {seccomp}")
        if sc.get("privileged"):
            bad.append(f"{c['name']}: privileged")
    return bad


#: The comment line in which a manifest states the Pod Security Standard level it is written for.
STATED_LEVEL = re.compile(r"^# Pod Security Standard: (restricted|baseline|privileged)\.", re.M)


def stated_level(text: str) -> str | None:
    m = STATED_LEVEL.search(text)
    return m[1] if m else None


def rdma_resources(spec: dict) -> list[str]:
    """The RDMA device plugin resources (`rdma/...`) the pod's first container requests."""
    limits = spec["containers"][0].get("resources", {}).get("limits", {})
    return [name for name, count in limits.items() if name.startswith("rdma/") and int(count) > 0]
