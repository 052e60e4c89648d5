"""Quantized safetensors checkpoints as producers publish them.

    files        safetensors reading / validation / atomic writing, shard discovery
    producers    one declarative record per producer convention, and detection
    inspection   ``fmtsim checkpoint inspect``: producer, code statistics, lint findings
    dequant      ``fmtsim checkpoint dequantize``: exact products rounded once to BF16/F16/F32
    conversion   OCP FP8 -> FNUZ (``fmtsim fnuz convert``, ``fmtsim checkpoint convert --to fnuz``)
    recast       MXFP4 <-> NVFP4, MXFP4 -> block FP8, FP8 -> MXFP8 with a loss report
    explain      ``fmtsim checkpoint explain`` (which recipe made it) and ``diff``
    cli          the ``fmtsim checkpoint`` subcommands
"""

from __future__ import annotations

from .conversion import META_KEY, ConversionPlan, ConversionSummary, ShardResult, convert, plan
from .files import DTYPES, CheckpointError, Entry, Header, find_source, load, read_header

__all__ = ["Header", "Entry", "read_header", "load", "find_source", "plan", "convert", "ConversionPlan",
           "ConversionSummary", "ShardResult", "CheckpointError", "DTYPES", "META_KEY"]
