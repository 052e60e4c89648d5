"""Matrix units: bit-exact models of how hardware sums low-precision products.

    UNITS           name -> Unit record (units.py; each cites its source)
    matmul          D = A @ B + C on a named unit, chained along K (gemm.py)
    slow_matmul     the Fraction twin, one output at a time (slow.py)

Data flows: formats -> mma.arith (codes split into sign, significand, exponent) ->
mma.step (one fused step, integer arithmetic; mma.fma: the exactly rounded FMAs of the
fp32 / fp64 units) -> mma.gemm (chaining, promotion,
split-K, MX / NVFP4 tensors). Conformance against the peer MMA-Sim lives in
fmtsim.conformance.impls.mmasim.
"""

from .gemm import matmul
from .slow import slow_matmul
from .units import F8F6F4, UNITS, Unit, get_unit, unit_names

__all__ = ["UNITS", "Unit", "get_unit", "unit_names", "matmul", "slow_matmul", "F8F6F4"]
