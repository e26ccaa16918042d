"""How many nodes the launchers' variables say a job spans (the report's network verdict)."""

import pytest

from ftenv.launch import node_count


@pytest.mark.parametrize(
    "env, expected",
    [
        ({}, (1, "single node")),
        ({"PET_NNODES": "4", "PET_NODE_RANK": "1", "PET_MASTER_ADDR": "m"}, (4, "torchrun variables")),
        ({"PET_NNODES": "1:4", "PET_RDZV_ENDPOINT": "m:1"}, (4, "torchrun variables")),
        (
            {"TORCHELASTIC_RUN_ID": "x", "LOCAL_RANK": "0", "WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8"},
            (2, "torchrun variables"),
        ),
        ({"TORCHELASTIC_RUN_ID": "x", "LOCAL_RANK": "0"}, (None, None)),
    ],
)
def test_node_count_from_the_launchers_variables(env, expected):
    assert node_count.node_count(env) == expected
