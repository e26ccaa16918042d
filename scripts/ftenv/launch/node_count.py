"""How many nodes a job spans, for the start-up report's network verdict (ftenv.report.network):
the report's wing cannot read the launchers' variables, so the commands that print it ask here.
"""

from __future__ import annotations

from collections.abc import Mapping

from ftenv.launch import cluster_env


def node_count(env: Mapping[str, str]) -> tuple[int | None, str | None]:
    """How many nodes this job spans and which launcher says so, for the report's network verdict:
    the launch `detect` reads (an elastic N:M counts its most), or inside torchrun's workers
    WORLD_SIZE over LOCAL_WORLD_SIZE; (None, None) when the environment does not say."""
    try:
        launch = cluster_env.detect(env)
    except cluster_env.LaunchError:
        world, local = (env.get(v) or "" for v in ("WORLD_SIZE", "LOCAL_WORLD_SIZE"))
        if world.isdigit() and local.isdigit() and int(local) > 0:
            return -(-int(world) // int(local)), "torchrun variables"
        return None, None
    most = launch.nnodes.split(":")[-1]
    return (int(most) if most.isdigit() else None), launch.source
