"""The torch and torchao built-in implementations (CI installs torch 2.13 and torchao 0.18)."""

import numpy as np
import pytest

from fmtsim.conformance.divergences import divergences_of
from fmtsim.conformance.run import run

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'fmtsim[torch]')")
pytest.importorskip("torchao", reason="torchao is not installed (pip install 'fmtsim[torch]')")


def test_torch_and_torchao_conform_with_only_named_divergences():
    rows = run(("torch", "torchao"), big=True)
    bad = [(r.impl, r.fmt, r.model, r.examples) for r in rows if r.failed]
    assert not bad, bad
    seen = {name for r in rows for name in r.known}
    # every divergence named for these peers is real: it shows on the coverage models
    from fmtsim.conformance.impls.torchao import TORCHAO_BLOCK_DIVERGENCES

    named = {d.name for impl in ("torch", "torchao") for d in divergences_of(impl)} | set(TORCHAO_BLOCK_DIVERGENCES)
    assert named == seen, named ^ seen
    models = {(r.impl, r.model.split()[0]) for r in rows}
    assert {("torch", "decode_all"), ("torch", "encode_all16"), ("torch", "encode_random"),
            ("torchao", "decode_all"), ("torchao", "encode_ties"), ("torchao", "block_mx"),
            ("torchao", "mx"), ("torchao", "block_nvfp4")} <= models
    assert {r.fmt for r in rows if r.model == "decode_all"} == {
        "e4m3", "e5m2", "e4m3fnuz", "e5m2fnuz", "e8m0", "e2m1", "e3m2", "e2m3"}
    assert {r.fmt for r in rows if r.impl == "torchao" and r.model.startswith("block_mx")} == {
        "mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp6_e3m2", "mxfp4"}


def test_a_wrong_profile_is_caught():
    """The comparison can fail: torch's E5M2 against the ml_dtypes profile differs on NaN."""
    rows = run(("torch",), formats=["e5m2"], big=False, profile="ml_dtypes")
    assert sum(r.failed for r in rows) > 0


def test_torch_e8m0_divergences_are_exactly_the_named_sets():
    """Every float32 subnormal and a sweep of negatives: torch differs from the torch profile
    exactly where the named E8M0 divergences say (no more: the masks are not blanket)."""
    from fmtsim import encode
    from fmtsim.conformance.divergences import explain
    from fmtsim.conformance.impls.torch import torch_adapter

    sub = np.arange(1, 1 << 23, dtype=np.uint32).view(np.float32)
    x = np.concatenate([sub, -sub[::97], np.float32([0.0, -0.0, 1.5, 3.0, -3.0])])
    theirs = torch_adapter().encode(x, "e8m0")
    ours = encode(x, "e8m0", profile="torch")
    known = explain("torch", "e8m0", "float32", x)
    diff = theirs != ours
    sub_mask = known["torch.e8m0_subnormal_ties_up"] & ~known["torch.e8m0_zero_and_sign"]
    assert np.array_equal(diff & ~known["torch.e8m0_zero_and_sign"], sub_mask)
    # on the negatives, torch writes the code of |x|
    neg = x < 0
    assert np.array_equal(theirs[neg], torch_adapter().encode(-x[neg], "e8m0"))


def test_cli_names_a_missing_peer(monkeypatch, capsys):
    import importlib.util

    from fmtsim.cli import main

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    assert main(["conform", "--impl", "torchao", "--quick"]) == 2
    assert "torch package is not installed" in capsys.readouterr().err


def test_a_wrong_block_rule_is_caught(monkeypatch):
    """The block comparison can fail: fmtsim's MX elements rounded ties-away differ from torchao."""
    from fmtsim import mx
    from fmtsim.conformance.impls.torchao import torchao_block_rows

    real = mx.quantize
    monkeypatch.setattr(mx, "quantize", lambda x, scheme, **kw: real(x, scheme, rounding="rna", **kw))
    rows = torchao_block_rows(["mxfp4"])
    assert sum(r.failed for r in rows if r.model.startswith("block_mx")) > 0


def test_cli_refuses_a_check_that_checks_nothing(capsys):
    from fmtsim.cli import main

    assert main(["conform", "--impl", "torch", "--formats", "mxfp4"]) == 2
    assert "nothing to check" in capsys.readouterr().err
