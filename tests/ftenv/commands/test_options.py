"""The option types `ftenv watch` and `ftenv analyze` share (ftenv.commands.options)."""

import argparse

import pytest

from ftenv.commands import options
from ftenv.watchdog import thresholds


def test_shared_option_types_for_watch_and_analyze():
    assert options.factor_type("1.001") == 1.001 and options.factor_type("3") == thresholds.SLOW_FACTOR
    assert options.count_type("0") == 0
    for bad, check in (("1", options.factor_type), ("0.5", options.factor_type), ("-1", options.count_type)):
        with pytest.raises(argparse.ArgumentTypeError):
            check(bad)
