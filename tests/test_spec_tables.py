"""The committed spec_tables/ are exactly what tools/gen_spec_tables.py writes,
and their values agree with an independent source (ml_dtypes) where one exists."""

import csv
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np

import fmtsim

ROOT = Path(__file__).resolve().parent.parent


def test_committed_tables_are_fresh():
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_spec_tables.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_csv_values_agree_with_ml_dtypes():
    for name, f in fmtsim.FORMATS.items():
        if f.kind != "float" or f.ml_dtype is None:
            continue
        rows = list(csv.DictReader(open(ROOT / "spec_tables" / f"{name}.csv")))
        assert len(rows) == f.n_codes
        ref = np.arange(f.n_codes, dtype=np.uint8).view(f.ml_dtype).astype(np.float64)
        for row, r in zip(rows, ref, strict=True):
            if row["class"] == "nan":
                assert np.isnan(r)
            elif row["class"] == "inf":
                assert np.isinf(r)
            else:
                assert Fraction(row["value"]) == Fraction(float(r))
                assert float.fromhex(row["hex_value"]) == r
