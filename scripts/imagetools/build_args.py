"""The Dockerfile's build args and the labels it writes with them, derived from versions.toml: the
image only ever sees their values, so they live on the host, with the tags they carry.
"""

from __future__ import annotations

from ftenv.stack import versions
from imagetools.tags import image_ref, stack_tag


def build_args(variant: versions.Variant) -> dict[str, str]:
    """The Dockerfile's ARGs, all of them derived from versions.toml."""
    return {
        "BASE_IMAGE": variant.base_image,
        "VARIANT": variant.name,
        "CUDA_VERSION": variant.cuda,
        "CUDA_MAJOR_MINOR": variant.cuda_major_minor,
        "TORCH_VERSION": variant.torch,
        "TORCHAUDIO_VERSION": variant.torchaudio,
        "TORCH_INDEX_URL": variant.torch_index,
        "CUDNN_PACKAGE": variant.cudnn_package,
        "CUDNN_VERSION": variant.cudnn,
        "TRANSFORMERS_VERSION": variant.python["transformers"],
        "FUNASR_VERSION": variant.python["funasr"],
        "MODELSCOPE_VERSION": variant.python["modelscope"],
        "MIN_DRIVER": variant.min_driver,
        "IMAGE_REF": image_ref(variant),
        "IMAGE_TAG": stack_tag(variant),
        "IMAGE_TITLE": variant.image["title"],
        "IMAGE_SOURCE": variant.image["source"],
    }


#: Each label the Dockerfile's LABEL writes and the build arg whose value it takes.
LABEL_ARGS = {
    "org.opencontainers.image.title": "IMAGE_TITLE",
    "org.opencontainers.image.version": "IMAGE_TAG",
    "org.opencontainers.image.revision": "REVISION",
    "org.opencontainers.image.source": "IMAGE_SOURCE",
    "org.opencontainers.image.created": "CREATED",
    "org.opencontainers.image.ref.name": "IMAGE_REF",
    "ftenv.variant": "VARIANT",
    "ftenv.torch.version": "TORCH_VERSION",
    "ftenv.cuda.version": "CUDA_VERSION",
    "ftenv.cudnn.version": "CUDNN_VERSION",
    "ftenv.transformers.version": "TRANSFORMERS_VERSION",
    "ftenv.funasr.version": "FUNASR_VERSION",
}


def labels(variant: versions.Variant, revision: str = "unknown", created: str = "unknown") -> dict[str, str]:
    """OCI labels plus the stack's versions, as the Dockerfile writes them: from the build args."""
    args = build_args(variant) | {"REVISION": revision, "CREATED": created}
    return {label: args[arg] for label, arg in LABEL_ARGS.items()}
