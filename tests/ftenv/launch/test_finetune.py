"""`ftenv finetune`: the command it builds, and every message for a bad input."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from ftenv import cli
from ftenv.launch import gpu_gate, inputs, launch_plan
from ftenv.launch.inputs import InputError, check_line
from ftenv.launch.runlife import lease
from ftenv.watchdog import watch
from support import GOOD_RECORD, ROOT
from support.finetune_launch import argv_of, cmdline, overrides_of, parse, work_out

GOOD = GOOD_RECORD


def test_single_node_command_is_upstreams_recipe(work):
    p = work_out(work, "--gpus-per-node", "1")
    argv = argv_of(p)
    # torchrun, in-process (the stop's exit code), forwarding Slurm's SIGUSR1/2 to its workers too
    assert argv[:3] == [sys.executable, "-m", "ftenv.launch.runlife.torchrun"]
    assert argv[3:13] == [
        "--nnodes", "1", "--nproc_per_node", "1", "--node_rank", "0",
        "--master_addr", "127.0.0.1", "--master_port", "26669",
    ]  # fmt: skip
    assert argv[13] == "--signals-to-handle=SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1,SIGUSR2"
    assert argv[14:16] == ["-m", "ftenv.trainer.funasr_entry"]  # every run: the run's life is installed
    assert overrides_of(p) == [
        f"++model={work}/model",
        "++trust_remote_code=false",
        f"++train_data_set_list={work}/train.jsonl",
        f"++valid_data_set_list={work}/val.jsonl",
        "++dataset_conf.data_split_num=1",
        "++dataset_conf.batch_sampler=BatchSampler",
        "++dataset_conf.batch_size=6000",
        "++dataset_conf.sort_size=1024",
        "++dataset_conf.batch_type=token",
        "++dataset_conf.num_workers=4",
        "++train_conf.max_epoch=50",
        "++train_conf.log_interval=1",
        "++train_conf.resume=true",
        "++train_conf.validate_interval=2000",
        "++train_conf.save_checkpoint_interval=2000",
        "++train_conf.effective_save_name_excludes=None",
        "++train_conf.keep_nbest_models=20",
        "++train_conf.avg_nbest_model=10",
        "++train_conf.use_deepspeed=false",
        "++optim_conf.lr=0.0002",
        "++audio_encoder_conf.freeze=true",
        "++audio_adaptor_conf.freeze=true",
        "++llm_conf.freeze=false",
        "++disable_update=true",
        f"++output_dir={work}/out",
        f"++hydra.run.dir={work}/out/hydra/${{now:%Y-%m-%d}}/${{now:%H-%M-%S}}",
    ]
    assert p.env == {
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "MODELSCOPE_OFFLINE": "1",
        "FTENV_OUTPUT_DIR": f"{work}/out",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "3",
        "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
        "TORCH_FR_BUFFER_SIZE": "2000",
        "TORCH_NCCL_TRACE_BUFFER_SIZE": "2000",
        "TORCH_FR_DUMP_TEMP_FILE": f"{work}/out/nccl-flight-recorder/rank_",
        "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": f"{work}/out/nccl-flight-recorder/rank_",
    }


def test_user_overrides_replace_defaults_and_pass_through(work):
    p = work_out(
        work, "--gpus-per-node", "2", "++train_conf.max_epoch=3", "++llm_conf.freeze=true", "++foo.bar=x y"
    )
    ov = overrides_of(p)
    assert [o for o in ov if "max_epoch" in o] == ["++train_conf.max_epoch=3"]
    assert [o for o in ov if o.startswith("++llm_conf.freeze")] == ["++llm_conf.freeze=true"]
    assert ov[-3:] == ["++train_conf.max_epoch=3", "++llm_conf.freeze=true", "++foo.bar=x y"]


def test_slurm_and_pytorchjob_commands(work):
    slurm = {
        "SLURM_JOB_ID": "9",
        "SLURM_STEP_ID": "0",
        "SLURM_JOB_NUM_NODES": "2",
        "SLURM_STEP_NUM_NODES": "2",
        "SLURM_NODEID": "1",
        "SLURM_STEP_NODELIST": "dgx[01-02]",
        "SLURM_STEP_TASKS_PER_NODE": "1(x2)",
    }
    argv = argv_of(work_out(work, "--gpus-per-node", "8", env=slurm))
    assert argv[3:13] == [
        "--nnodes", "2", "--nproc_per_node", "8", "--node_rank", "1",
        "--master_addr", "dgx01", "--master_port", "20009",
    ]  # fmt: skip
    worker = {"MASTER_ADDR": "ft-master-0", "MASTER_PORT": "23456", "WORLD_SIZE": "2", "RANK": "1"}
    assert argv_of(work_out(work, "--gpus-per-node", "8", env=worker))[7:13] == [
        "--node_rank", "1", "--master_addr", "ft-master-0", "--master_port", "23456",
    ]  # fmt: skip


def test_nccl_states_its_network_on_many_nodes_only(work):
    """More than one node: NCCL's INIT and NET INFO lines (the network it picked), nothing else of
    its debug stream; one node: nothing; the user's own NCCL_DEBUG or NCCL_DEBUG_SUBSYS stands."""
    many = {"PET_NNODES": "2", "PET_NODE_RANK": "0", "PET_MASTER_ADDR": "m"}
    env = work_out(work, "--gpus-per-node", "8", env=many).env
    assert env["NCCL_DEBUG"] == "INFO" and env["NCCL_DEBUG_SUBSYS"] == "INIT,NET"
    elastic = {"PET_NNODES": "1:4", "PET_RDZV_ENDPOINT": "m:29400"}
    assert work_out(work, "--gpus-per-node", "8", env=elastic).env["NCCL_DEBUG_SUBSYS"] == "INIT,NET"
    one = work_out(work, "--gpus-per-node", "8", env={"PET_NNODES": "1"}).env
    assert "NCCL_DEBUG" not in one and "NCCL_DEBUG_SUBSYS" not in one
    for own in ({"NCCL_DEBUG": "WARN"}, {"NCCL_DEBUG_SUBSYS": "ALL"}):
        env = work_out(work, "--gpus-per-node", "8", env={**many, **own}).env
        assert "NCCL_DEBUG" not in env and "NCCL_DEBUG_SUBSYS" not in env


def test_gpus_per_node_from_pet_variable(work):
    env = {"PET_NNODES": "1", "PET_NPROC_PER_NODE": "4"}
    assert argv_of(work_out(work, env=env))[5:7] == ["--nproc_per_node", "4"]


def test_no_gpu_and_no_count_is_explained(work):
    with pytest.raises(InputError, match=r"no GPU visible.*--gpus-per-node N"):
        work_out(work, env={"CUDA_VISIBLE_DEVICES": ""})


def test_model_dir_model_py_turns_on_remote_code(work):
    (work / "model/model.py").write_text("# the example's model code\n")
    ov = overrides_of(work_out(work, "--gpus-per-node", "1"))
    assert ov[1:3] == ["++trust_remote_code=true", f"++remote_code={work}/model/model.py"]


def test_remote_code_option(work):
    (work / "example_model.py").write_text("# upstream example's model code\n")
    ov = overrides_of(work_out(work, "--gpus-per-node", "1", "--remote-code", "example_model.py"))
    assert ov[1:3] == ["++trust_remote_code=true", f"++remote_code={work}/example_model.py"]
    with pytest.raises(InputError, match=f"--remote-code {work}/nope.py is not a file"):
        work_out(work, "--gpus-per-node", "1", "--remote-code", "nope.py")


def test_allow_hub_takes_a_hub_id_and_stays_online(work):
    p = work_out(work, "--gpus-per-node", "1", "--allow-hub")
    assert not {"HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "MODELSCOPE_OFFLINE"} & set(p.env)
    assert "++disable_update=true" not in argv_of(p)
    argv = cmdline(work, "--gpus-per-node", "1", "--allow-hub")
    argv[2] = "FunAudioLLM/Fun-ASR-Nano-2512"
    p = launch_plan.plan_launch(parse(argv, cwd=work), environ={})
    assert "++model=FunAudioLLM/Fun-ASR-Nano-2512" in argv_of(p)


def test_trainer_option_is_split_like_a_shell(work):
    argv = argv_of(work_out(work, "--gpus-per-node", "2", trainer="/x/python -m ftenv.cpu_train"))
    assert argv[14:17] == ["/x/python", "-m", "ftenv.cpu_train"]


# --- bad inputs: each message, and the same input fixed passes --------------------------------


def test_good_line_passes(work):
    assert check_line(json.dumps(GOOD), work) is None


def _with(**changes) -> dict:
    item = json.loads(json.dumps(GOOD))
    for key, value in changes.items():
        if value is None:
            item.pop(key)
        else:
            item[key] = value
    return item


def _user(content: str) -> dict:
    item = json.loads(json.dumps(GOOD))
    item["messages"][1]["content"] = content
    return item


BAD_LINES = [
    ('{"messages": [}', "not valid JSON"),
    ("[1, 2]", "a JSON list, expected an object"),
    ('{"key": "a", "source": "a.wav", "target": "hi"}', "source/target format"),
    (json.dumps(_with(messages=[])), "'messages' must be a non-empty list"),
    (
        json.dumps(_with(messages=[{"role": "user"}])),
        r"messages\[0\] must be an object with 'role' and 'content'",
    ),
    (json.dumps(_with(messages=[GOOD["messages"][0], GOOD["messages"][2]])), "no message with role 'user'"),
    (json.dumps(_with(messages=GOOD["messages"][:2])), "no message with role 'assistant'"),
    (json.dumps(_user("语音转写：wav/a.wav")), r"has no <\|startofspeech\|>"),
    (json.dumps(_user("<|startofspeech|>wav/a.wav<|endofspeech|>")), "must follow <.*> with '!'"),
    (
        json.dumps(_user("<|startofspeech|>!wav/missing.wav<|endofspeech|>")),
        "audio file wav/missing.wav not found",
    ),
    (json.dumps(_with(speech_length=None)), "no speech_length: FunASR reads it as 0 and drops the line"),
    (json.dumps(_with(text_length="abc")), "text_length 'abc' is not an integer"),
]


@pytest.mark.parametrize(("line", "message"), BAD_LINES)
def test_bad_line_messages(work, line, message):
    problem = check_line(line, work)
    assert problem is not None
    assert __import__("re").search(message, problem), problem


def test_urls_are_not_checked_for_existence(work):
    line = json.dumps(_user("<|startofspeech|>!https://example.org/a.wav<|endofspeech|>"))
    assert check_line(line, work) is None


def test_bad_jsonl_names_the_file_and_line(work):
    lines = (work / "train.jsonl").read_text().splitlines()
    lines.insert(1, '{"source": "a.wav", "target": "x"}')
    (work / "train.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as err:
        work_out(work, "--gpus-per-node", "1")
    text = str(err.value)
    assert f"train data {work}/train.jsonl line 2: no 'messages' key" in text
    assert "each line must be one JSON object like:" in text
    assert "line 1" not in text and "line 3" not in text


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda w: __import__("shutil").rmtree(w / "model"), "model dir {w}/model does not exist"),
        (lambda w: (w / "model/config.yaml").unlink(), "model dir {w}/model has no config.yaml"),
        (lambda w: (w / "model/model.pt").unlink(), "model dir {w}/model has no model.pt"),
        (lambda w: (w / "train.jsonl").unlink(), "train data {w}/train.jsonl does not exist"),
        (lambda w: (w / "val.jsonl").write_text(""), "valid data {w}/val.jsonl is empty"),
        (
            lambda w: ((w / "val.jsonl").unlink(), (w / "val.jsonl").mkdir()),
            "valid data {w}/val.jsonl is not a file",
        ),
        (
            lambda w: (w / "out").write_text("x"),  # planning looks only: no folder made before
            "output dir {w}/out is not a directory",
        ),
    ],
)
def test_bad_input_messages(work, setup, message):
    work_out(work, "--gpus-per-node", "1")  # passes before the damage
    setup(work)
    with pytest.raises(InputError, match=__import__("re").escape(message.format(w=work))):
        work_out(work, "--gpus-per-node", "1")


def test_a_list_file_is_followed_to_its_jsonl(work):
    (work / "train.list").write_text(f"{work}/train.jsonl\n")
    assert inputs.check_jsonl(work / "train.list", "train", work) == []
    (work / "train.list").write_text("train.txt\n")
    assert (
        "reads a file not named *.jsonl as a list"
        in inputs.check_jsonl(work / "train.list", "train", work)[0]
    )


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to switch to an unprivileged user")
@pytest.mark.skipif(not Path("/usr/bin/python3").is_file(), reason="needs a system python for that user")
def test_unwritable_output_dir_for_a_real_unprivileged_user():
    # Root writes anywhere, so the check is run as `nobody` on a folder it may only read.
    base = Path(tempfile.mkdtemp(prefix="ftenv-ro-"))
    try:
        os.chmod(base, 0o755)
        out = base / "out"
        out.mkdir(mode=0o555)
        code = (
            "import sys; from ftenv.launch.inputs import check_output_dir, make_output_dir; "
            "from pathlib import Path; check = make_output_dir if sys.argv[2] == '1' else check_output_dir; "
            "print('\\n'.join(check(Path(sys.argv[1]))))"
        )
        scripts = Path(tempfile.mkdtemp(prefix="ftenv-src-"))
        os.chmod(scripts, 0o755)
        shutil.copytree(ROOT / "scripts/ftenv", scripts / "ftenv")
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(scripts)}

        def as_nobody(path, create="1", **extra_env):
            return subprocess.run(
                ["/usr/bin/python3", "-c", code, str(path), create],
                capture_output=True, text=True, env={**env, **extra_env}, user=65534, group=65534, cwd="/",
            )  # fmt: skip

        bad = as_nobody(out)
        assert f"output dir {out} is not writable by uid 65534" in bad.stdout, bad.stderr
        # The folder belongs to uid 0: under rootless Docker/Podman that is the host user.
        assert "under rootless Docker or Podman" in bad.stdout and "`--user 0:0`" in bad.stdout
        # On Kubernetes the fix is the volume's ownership (fsGroup does not reach every volume).
        k8s = as_nobody(out, KUBERNETES_SERVICE_HOST="10.0.0.1").stdout
        assert "writable by uid 1000 or gid 0" in k8s and "fsGroup is not applied" in k8s, k8s
        # A dry run only looks: an existing read-only folder, a folder it could not create.
        assert f"output dir {out} is not writable by uid 65534" in as_nobody(out, "0").stdout
        assert (
            f"output dir {out}/sub cannot be created: {out} is not writable"
            in as_nobody(out / "sub", "0").stdout
        )
        os.chmod(out, 0o777)
        for create in ("1", "0"):
            good = as_nobody(out / "sub", create)
            assert good.returncode == 0 and good.stdout.strip() == "", good.stderr
    finally:
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(scripts, ignore_errors=True)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["++a=1", "--dry-run"], "'--dry-run' comes after a Hydra override"),
        (["train_conf.max_epoch"], "is not a Hydra override"),
    ],
)
def test_bad_override_messages(work, extra, message):
    with pytest.raises(InputError, match=message):
        work_out(work, "--gpus-per-node", "1", *extra)


@pytest.mark.parametrize(
    ("override", "option"),
    [
        ("++output_dir=/elsewhere", "--output-dir"),
        ("++train_data_set_list=/other.jsonl", "--train"),
        ("++valid_data_set_list=/other.jsonl", "--valid"),
        ("++model=/other-model", "--model-dir"),
        ("~output_dir", "--output-dir"),
    ],
)
def test_an_override_of_what_an_option_sets_is_refused(work, override, option):
    """The trainer would write to (or read) another folder than the one the folder checks, the
    lease, the data check and the watchdog use: the option is the one place for it."""
    with pytest.raises(InputError, match=f"is what {option} sets: .* give {option} instead"):
        work_out(work, "--gpus-per-node", "1", override)


def test_a_repeated_key_is_its_last_value_for_every_check(work):
    """The folder check reads max_epoch as the trainer will (the last one given): a run finished
    at epoch 1 is refused with max_epoch=1 last, and resumed with max_epoch=3 last."""
    (work / "out").mkdir()
    torch = pytest.importorskip("torch")
    torch.save({"epoch": 1}, work / "out/model.pt")
    finished = cli.main([*cmdline(work, "--gpus-per-node", "1", "--dry-run"), "++train_conf.max_epoch=3",
                         "++train_conf.max_epoch=1"])  # fmt: skip
    assert finished == 2
    p = work_out(work, "--gpus-per-node", "1", "++train_conf.max_epoch=1", "++train_conf.max_epoch=3")
    assert p.max_epoch == 3 and overrides_of(p)[-1] == "++train_conf.max_epoch=3"


def test_the_watchdog_runs_in_finetunes_own_process_and_the_lease_ends_with_the_run(work, monkeypatch):
    """No second interpreter: the watchdog of `ftenv watch` runs in `ftenv finetune`'s process with
    the plan's output folder and the torchrun command, its exit code is the command's, and the
    folder's lease, held while it runs, is given up when the run ends (in a container the renewer
    dies with the container, and the next container could not tell the lease was left)."""
    for key in [k for k in os.environ if k.startswith(("SLURM_", "PET_"))] + ["MASTER_ADDR", "WORLD_SIZE"]:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("FTENV_REPORT", "0")
    monkeypatch.setenv("FTENV_LEASE_RENEW_S", "0.5")  # the renewer sees the lease gone and ends
    monkeypatch.setattr(gpu_gate, "refusal", lambda: None)
    monkeypatch.setattr(os, "execv", lambda *a: pytest.fail(f"exec'd {a}"))
    seen = []

    def watchdog(options):
        seen.append((options, (work / "out" / lease.LEASE).exists()))
        return 7

    monkeypatch.setattr(watch, "run", watchdog)
    before = dict(os.environ)
    try:
        rc = cli.main([*cmdline(work, "--gpus-per-node", "1", "--skip-data-check")])
    finally:  # the launch exports the trainer's variables into this process
        os.environ.clear()
        os.environ.update(before)
    assert rc == 7
    [(options, held)] = seen
    assert held and options.output_dir == work / "out", options
    assert options.argv[:3] == [sys.executable, "-m", "ftenv.launch.runlife.torchrun"]
    assert not (work / "out" / lease.LEASE).exists()


def test_missing_options_are_named(work):
    args = parse(["finetune", "--model-dir", "m"])
    with pytest.raises(InputError, match="missing --train, --valid, --output-dir"):
        launch_plan.plan_launch(args, environ={})


def test_cli_dry_run_prints_the_command_and_creates_nothing(work, capsys, monkeypatch):
    for key in [k for k in os.environ if k.startswith(("SLURM_", "PET_"))] + ["MASTER_ADDR", "WORLD_SIZE"]:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("TORCH_CUDNN_SDPA_DEPRIORITIZED", "1")
    rc = cli.main([*cmdline(work, "--gpus-per-node", "1", "--dry-run"), "++train_conf.max_epoch=1"])
    out, err = capsys.readouterr()
    assert rc == 0
    argv = shlex.split(out)
    assert argv[2] == "ftenv.launch.runlife.torchrun" and argv[-1] == "++train_conf.max_epoch=1"
    assert "launch: single node: node 0 of 1, master 127.0.0.1:26669" in err
    assert "TORCH_CUDNN_SDPA_DEPRIORITIZED=1: cuDNN attention is not moved to the front" in err
    assert not (work / "out").exists()


def test_a_dry_run_of_everything_that_makes_folders_still_creates_nothing(
    work, monkeypatch, tmp_path_factory
):
    """Planning only looks: with --compile (its caches), --fresh (moves the checkpoints aside), an
    unwritable HOME (the caches move to the temporary folder) and a run in the output folder, a
    dry run leaves the work folder and the temporary folder as they were."""
    for key in [
        k for k in os.environ if k.startswith(("SLURM_", "PET_", "HF_", "XDG_", "TORCHINDUCTOR", "TRITON"))
    ]:
        monkeypatch.delenv(key, raising=False)
    tmp, home = tmp_path_factory.mktemp("tmp"), tmp_path_factory.mktemp("home")
    home.chmod(0o500)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("TMPDIR", str(tmp))
    (work / "out").mkdir()
    (work / "out/model.pt.ep1").write_bytes(b"")

    def tree():
        return sorted(str(p) for root in (work, tmp) for p in root.rglob("*"))

    before = tree()
    assert cli.main(cmdline(work, "--gpus-per-node", "1", "--dry-run", "--compile", "--fresh")) == 0
    assert tree() == before


def test_cli_reports_bad_input_with_exit_2(work, capsys):
    argv = cmdline(work, "--gpus-per-node", "1", "--dry-run")
    argv[2] = "/nope"
    rc = cli.main(argv)
    assert rc == 2
    assert "ftenv finetune: model dir /nope does not exist" in capsys.readouterr().err


# --- options and overrides a user gets wrong: exit 2 and a message that names the fix -----------


@pytest.fixture
def clean_env(monkeypatch):
    for key in [k for k in os.environ if k.startswith(("SLURM_", "PET_"))] + ["MASTER_ADDR", "WORLD_SIZE"]:
        monkeypatch.delenv(key, raising=False)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--gpus-per-node", "0"],
            "--gpus-per-node 0: give the number of GPUs (processes) per node, 1 or more",
        ),
        (
            ["--gpus-per-node", "-2"],
            "--gpus-per-node -2: give the number of GPUs (processes) per node, 1 or more",
        ),
        (["--gpus-per-node", "1", "--nnodes", "0"], "--nnodes 0: the number of nodes is 1 or more"),
        (["--gpus-per-node", "1", "--node-rank", "-1"], "--node-rank -1: node ranks count from 0"),
        (
            ["--gpus-per-node", "1", "--master-port", "70000"],
            "--master-port 70000 is not a TCP port (1-65535)",
        ),
        (["--gpus-per-node", "1", "--master-port", "0"], "--master-port 0 is not a TCP port (1-65535)"),
        (["--gpus-per-node", "1", "train_conf.max_epoch=5"], "write ++train_conf.max_epoch=5"),
        (["--gpus-per-node", "1", "+train_conf.max_epoch=5"], "write ++train_conf.max_epoch=5"),
        (["--gpus-per-node", "1", "++a=b=c"], "is not a Hydra override (mismatched input '='"),
    ],
)
def test_bad_options_exit_2_and_name_the_fix(work, clean_env, capsys, extra, message):
    rc = cli.main([*cmdline(work, "--dry-run"), *extra])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert err.startswith("ftenv finetune: ") and message in err, err
    assert cli.main([*cmdline(work, "--dry-run"), "--gpus-per-node", "1"]) == 0  # without the mistake


def test_hydra_own_settings_pass_as_plain_key_value(work):
    argv = argv_of(work_out(work, "--gpus-per-node", "1", "hydra.run.dir=/x"))
    assert "hydra.run.dir=/x" in argv
    assert not [a for a in argv if a.startswith("++hydra.run.dir=")], "the user's run dir replaces ours"


def test_hydra_writes_its_run_folder_under_the_output_dir(work, tmp_path_factory):
    """Hydra's own default is outputs/<date>/<time> in the working directory, which a read-only root
    (enroot) or another uid:gid cannot write: with the launcher's override, a Hydra app run the way
    funasr-train-ds is (version_base=None, no config) writes only under the output dir."""
    app = work / "app.py"
    app.write_text(
        "import hydra\n"
        "@hydra.main(config_name=None, version_base=None)\n"
        "def main(cfg):\n    print('ran')\n"
        "main()\n"
    )
    cwd = tmp_path_factory.mktemp("cwd")
    hydra_args = [a for a in argv_of(work_out(work, "--gpus-per-node", "1")) if a.startswith("++hydra.")]
    for args, writes_cwd in ((hydra_args, False), ([], True)):  # without it: the cwd is written
        proc = subprocess.run(
            [sys.executable, str(app), "++x=1", *args], cwd=cwd, capture_output=True, text=True, timeout=120
        )
        assert proc.returncode == 0 and "ran" in proc.stdout, proc.stderr
        assert (cwd / "outputs").exists() == writes_cwd, sorted(p.name for p in cwd.iterdir())
    records = list((work / "out/hydra").glob("*/*/.hydra/overrides.yaml"))
    assert len(records) == 1 and "++x=1" in records[0].read_text(), records


def test_missing_absolute_audio_path_does_not_mention_relative_paths(work):
    absolute = check_line(json.dumps(_user(f"<|startofspeech|>!{work}/wav/none.wav<|endofspeech|>")), work)
    assert absolute == (
        f"audio file {work}/wav/none.wav not found "
        "(in a container the data must be mounted at that same path)"
    )
    relative = check_line(json.dumps(_user("<|startofspeech|>!wav/none.wav<|endofspeech|>")), work)
    assert f"relative paths are read from the working directory {work}" in relative


def test_elastic_launch_line_has_no_none(work, clean_env, monkeypatch, capsys):
    monkeypatch.setenv("PET_NNODES", "2:4")
    monkeypatch.setenv("PET_RDZV_ENDPOINT", "ft-worker-0:29400")
    assert cli.main([*cmdline(work, "--gpus-per-node", "1", "--dry-run")]) == 0
    err = capsys.readouterr().err
    assert "node None" not in err
    assert "launch: torchrun variables: 2:4 nodes, node rank assigned at the rendezvous" in err
