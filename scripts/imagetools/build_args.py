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


def labels(variant: versions.Variant, revision: str = "unknown", created: str = "unknown") -> dict[str, str]:
    """OCI labels plus the stack's versions, as the Dockerfile writes them."""
    return {
        "org.opencontainers.image.title": variant.image["title"],
        "org.opencontainers.image.version": stack_tag(variant),
        "org.opencontainers.image.revision": revision,
        "org.opencontainers.image.source": variant.image["source"],
        "org.opencontainers.image.created": created,
        "org.opencontainers.image.ref.name": image_ref(variant),
        "ftenv.variant": variant.name,
        "ftenv.torch.version": variant.torch,
        "ftenv.cuda.version": variant.cuda,
        "ftenv.cudnn.version": variant.cudnn,
        "ftenv.transformers.version": variant.python["transformers"],
        "ftenv.funasr.version": variant.python["funasr"],
    }
