"""Shared fixtures, and the guard that the tests run against an installed fmtsim."""

import json
import os
import sys
import warnings
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest

import fmtsim

ROOT = Path(__file__).resolve().parent.parent
# the scripts in tools/ (gen_checkpoints, ...) are imported by name; tools/ holds no package, so this
# cannot make the source tree's fmtsim importable (the repository root itself stays off sys.path)
sys.path.insert(0, str(ROOT / "tools"))


def _tree_stands_in_for_install() -> str | None:
    """Why the imported fmtsim is this checkout's source tree without being installed from it,
    or None. An editable install of this checkout is a real install; anything else that imports
    ROOT/fmtsim got there through sys.path (``python -m pytest`` from the root puts it first)."""
    here = Path(fmtsim.__file__).resolve().parent
    if here != ROOT / "fmtsim":
        return None
    # every fmtsim distribution sys.path can see (a build's fmtsim.egg-info in the checkout is one)
    dists = list(metadata.distributions(name="fmtsim"))
    for dist in dists:
        direct = json.loads(dist.read_text("direct_url.json") or "{}")
        if direct.get("dir_info", {}).get("editable") and \
                direct.get("url", "").rstrip("/").endswith(ROOT.as_posix()):
            return None
    if not dists:
        return "fmtsim is not installed"
    return "no editable install of this checkout is among the installed fmtsim distributions"


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: exhaustive or peer-heavy; run by `pytest --full` and CI")
    if config.getoption("--full", default=False):
        os.environ[FULL_ENV] = "1"
    why = _tree_stands_in_for_install()
    if why:
        raise pytest.UsageError(
            f"fmtsim was imported from the source tree {ROOT / 'fmtsim'} ({why}): the tests must run "
            "against the installed package. Run the console script `pytest` (not `python -m pytest`, "
            "which puts the current directory on sys.path), after `pip install \".[test]\"`, or "
            "`pip install -e \".[test]\"` to test the tree itself.")


# --- two tiers -------------------------------------------------------------------------------
# The README's test command (plain `pytest`) runs every test file but leaves out the tests marked
# `slow`: exhaustive table walks, the probe's full unit grid, every producer x target, the
# peer-heavy sweeps. CI runs everything (`pytest --full`, or FMTSIM_FULL_TESTS=1). Nothing is
# dropped: a slow test only waits for CI. `examples(n)` scales hypothesis example counts the same
# way (n under --full, a quarter otherwise).

FULL_ENV = "FMTSIM_FULL_TESTS"


def pytest_addoption(parser):
    parser.addoption("--full", action="store_true",
                     help=f"also run the tests marked slow (what CI runs; same as {FULL_ENV}=1)")


def full_run() -> bool:
    return os.environ.get(FULL_ENV) == "1"


def examples(n: int) -> int:
    """Hypothesis example count: n in a full run, a quarter of it (at least 10) otherwise."""
    return n if full_run() else max(10, n // 4)


def slow_unless(values, keep):
    """Parameters for pytest.mark.parametrize: those in ``keep`` run always, the rest are slow.
    A tuple value stands for several argument names, as in parametrize itself. A ``keep`` none of
    which is among the values is an error (the fast tier would silently run none of them)."""
    values = list(values)
    assert not keep or set(keep) & set(values), f"slow_unless: no value of keep {sorted(keep)} is among the values"

    def param(v):
        args = v if isinstance(v, tuple) else (v,)
        return pytest.param(*args, marks=pytest.mark.slow)
    return [v if v in keep else param(v) for v in values]


def heavy_formats(names=None):
    """Parameters for a per-format test that costs seconds per format: the formats of SAME_PATH_AS are slow."""
    names = list(fmtsim.FORMATS) if names is None else list(names)
    return slow_unless(names, keep=set(names) - set(SAME_PATH_AS))


def pytest_collection_modifyitems(config, items):
    if full_run():
        return
    slow = [it for it in items if it.get_closest_marker("slow")]
    if slow:
        items[:] = [it for it in items if not it.get_closest_marker("slow")]
        config.hook.pytest_deselected(items=slow)
        config._fmtsim_slow_left = len(slow)


def pytest_sessionfinish(session):
    # an xdist worker: hand the count of tests left out to the controller, which prints it
    out = getattr(session.config, "workeroutput", None)
    if out is not None:
        out["fmtsim_slow_left"] = getattr(session.config, "_fmtsim_slow_left", 0)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):  # pytest-xdist's controller: every worker collected the same
    left = getattr(node, "workeroutput", {}).get("fmtsim_slow_left", 0)
    node.config._fmtsim_slow_left = max(getattr(node.config, "_fmtsim_slow_left", 0), left)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    left = getattr(config, "_fmtsim_slow_left", 0)
    if left:
        terminalreporter.write_line(
            f"fmtsim: {left} tests marked slow were not run (exhaustive/peer-heavy); "
            f"`pytest --full` runs them, as CI does")


# pytest-xdist (CI: -n 2 on 2 cores): each worker's torch would run one OpenMP thread per core,
# oversubscribing the cores the workers share, and the waiting threads' spinning takes CPU from the
# other worker (the full MMA-Sim comparison of tests/test_mma_peers.py took ~3x the time). Each
# worker's torch gets its share of the cores, set once the tests have imported torch; numpy's BLAS
# threads are left alone (one thread each made the numpy-heavy probe tests slower).
_XDIST_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))


def pytest_runtest_setup(item):
    torch = sys.modules.get("torch")
    if _XDIST_WORKERS and torch is not None:
        share = max(1, (os.cpu_count() or 1) // _XDIST_WORKERS)
        if torch.get_num_threads() != share:
            torch.set_num_threads(share)


# numpy warns when NaN bit patterns pass through casts; the tests build such inputs on purpose
warnings.filterwarnings("ignore", message="invalid value encountered in cast", category=RuntimeWarning)


ALL_FORMATS = list(fmtsim.FORMATS)
# Formats that take exactly the code paths of an older one (the format named: same kind, specials and
# signedness, which is all rounding.py, oracle.py and the profiles branch on): the heaviest per-format tests
# run them in the full tier only (`heavy_formats`); every cheaper per-format test runs them always.
SAME_PATH_AS = {"e4m3ieee": "e5m2", "e3m4": "e5m2", "e4m3b11fnuz": "e4m3fnuz", "int2": "int4", "uint2": "uint4"}
FLOAT_FORMATS = [n for n, f in fmtsim.FORMATS.items() if f.kind == "float"]
ML_DTYPES_FLOATS = [
    n for n, f in fmtsim.FORMATS.items() if f.kind == "float" and f.ml_dtype is not None
]


@pytest.fixture(scope="session")
def rng():
    return np.random.default_rng(20261129)
