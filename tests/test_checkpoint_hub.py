"""Checkpoints written by the hub libraries fmtsim does not decode yet (bitsandbytes fixtures made by
bitsandbytes 0.50.2 itself, tools/gen_hub_fixtures.py): each is named and refused, never "0 quantized
tensors" with exit 0."""

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("safetensors", reason="checkpoint jobs need the safetensors package")
from safetensors.numpy import load_file, save_file  # noqa: E402

from fmtsim.checkpoint.dequant import dequantize  # noqa: E402
from fmtsim.checkpoint.files import CheckpointError  # noqa: E402
from fmtsim.checkpoint.inspection import inspect  # noqa: E402
from fmtsim.cli import main  # noqa: E402

HUB = Path(__file__).parent / "fixtures" / "hub"
LINEARS = 7  # q, k, v, o, gate, up, down of the one layer
BNB = {"bnb-nf4": "bitsandbytes-4bit", "bnb-nf4-dq": "bitsandbytes-4bit", "bnb-fp4-dq": "bitsandbytes-4bit",
       "bnb-int8": "bitsandbytes-int8"}


@pytest.mark.parametrize("folder", sorted(BNB))
def test_bitsandbytes_folders_are_named_and_refused(folder, tmp_path, capsys):
    r = inspect(HUB / folder)
    assert r.producers == {BNB[folder]: LINEARS}
    assert r.config_producers == [BNB[folder]]
    own = np.load(HUB / folder / "own_dequant.npz").files  # the library's quantized Linears
    assert sorted(f.tensor for f in r.findings if f.code == "layout" and f.severity == "error") == sorted(own)
    assert main(["checkpoint", "inspect", str(HUB / folder)]) == 1
    assert "bitsandbytes" in capsys.readouterr().out
    with pytest.raises(CheckpointError, match="bitsandbytes .*recognised but fmtsim does not decode it"):
        dequantize(HUB / folder, tmp_path / "out")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_the_fixtures_hold_every_quantized_linear_and_its_own_dequantization():
    for folder in BNB:
        own = np.load(HUB / folder / "own_dequant.npz")
        tensors = load_file(HUB / folder / "model.safetensors")
        assert len(own.files) == LINEARS
        for name in own.files:
            assert name in tensors
            want = np.uint32 if folder == "bnb-int8" else np.uint16  # float32 / bfloat16 bits
            assert own[name].dtype == want


def test_llm_int8_fixture_is_q_times_scb_times_float32_reciprocal_of_127():
    """The LLM.int8 layout the bitsandbytes-int8 record documents, held to bitsandbytes' own
    int8_vectorwise_dequant: float32 (q * SCB[row]) then * float32(1/127), each product rounded."""
    t = load_file(HUB / "bnb-int8" / "model.safetensors")
    own = np.load(HUB / "bnb-int8" / "own_dequant.npz")
    for name in own.files:
        q, scb = t[name].astype(np.float32), t[name[: -len(".weight")] + ".SCB"]
        got = (q * scb[:, None]) * np.float32(1 / 127)
        assert np.array_equal(got.astype(np.float32).view(np.uint32), own[name]), name


def _folder(tmp_path: Path, config: dict, tensors: dict) -> Path:
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "config.json").write_text(json.dumps(config))
    save_file(tensors, str(tmp_path / "model.safetensors"))
    return tmp_path


@pytest.mark.parametrize("method", ["gptq", "awq", "hqq", "quanto", "torchao"])
def test_a_declared_method_no_record_reads_is_refused_with_what_was_found(tmp_path, method, capsys):
    d = _folder(tmp_path / method, {"quantization_config": {"quant_method": method, "bits": 4}},
                {"l.qweight": np.zeros((8, 16), np.int32), "l.qzeros": np.zeros((1, 2), np.int32),
                 "l.scales": np.ones((1, 16), np.float16), "embed.weight": np.zeros((4, 4), np.float16)})
    with pytest.raises(CheckpointError, match=f"quant_method '{method}', a layout fmtsim does not read; the folder "
                       r"holds 2 packed tensor\(s\) \(I32 x2, e\.g\. l\.qweight\)"):
        inspect(d)
    with pytest.raises(CheckpointError, match="does not read"):
        dequantize(d, tmp_path / "out")
    assert main(["checkpoint", "inspect", str(d)]) != 0
    assert "does not read" in capsys.readouterr().err


def test_a_declared_method_over_plain_weights_is_not_refused(tmp_path):
    d = _folder(tmp_path / "plain", {"quantization_config": {"quant_method": "gptq"}},
                {"embed.weight": np.zeros((4, 4), np.float16)})
    assert inspect(d).errors == 0
