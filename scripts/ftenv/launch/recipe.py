"""Upstream's Fun-ASR-Nano fine-tuning recipe (examples/industrial_data_pretraining/fun_asr_nano/
finetune.sh, in its order; its unused deepspeed_config left out) as data, so that `ftenv finetune`,
the self-check's recipe run and the tiny model start from the same one.
"""

from __future__ import annotations

RECIPE_DEFAULTS: list[tuple[str, str]] = [
    ("dataset_conf.data_split_num", "1"),
    ("dataset_conf.batch_sampler", "BatchSampler"),
    ("dataset_conf.batch_size", "6000"),
    ("dataset_conf.sort_size", "1024"),
    ("dataset_conf.batch_type", "token"),
    ("dataset_conf.num_workers", "4"),
    ("train_conf.max_epoch", "50"),
    ("train_conf.log_interval", "1"),
    ("train_conf.resume", "true"),
    ("train_conf.validate_interval", "2000"),
    ("train_conf.save_checkpoint_interval", "2000"),
    ("train_conf.effective_save_name_excludes", "None"),
    ("train_conf.keep_nbest_models", "20"),
    ("train_conf.avg_nbest_model", "10"),
    ("train_conf.use_deepspeed", "false"),
    ("optim_conf.lr", "0.0002"),
    ("audio_encoder_conf.freeze", "true"),
    ("audio_adaptor_conf.freeze", "true"),
    ("llm_conf.freeze", "false"),
]
OFFLINE_OVERRIDES: list[tuple[str, str]] = [("disable_update", "true")]
#: Hydra's run folder (its .hydra/ config record and train_ds.log), under the output dir: Hydra's
#: default is outputs/<date>/<time> in the working directory, which a read-only root filesystem
#: (enroot, Kubernetes' readOnlyRootFilesystem) or another uid:gid cannot write.
HYDRA_RUN_SUBDIR = "hydra/${now:%Y-%m-%d}/${now:%H-%M-%S}"


def hydra_run_dir(output_dir) -> tuple[str, str]:
    """The override that puts Hydra's run folder under `output_dir`."""
    return ("hydra.run.dir", f"{output_dir}/{HYDRA_RUN_SUBDIR}")
