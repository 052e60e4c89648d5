import warnings

import numpy as np
import pytest

import fmtsim

# numpy warns when NaN bit patterns pass through casts; the tests build such inputs on purpose
warnings.filterwarnings("ignore", message="invalid value encountered in cast", category=RuntimeWarning)


ALL_FORMATS = list(fmtsim.FORMATS)
FLOAT_FORMATS = [n for n, f in fmtsim.FORMATS.items() if f.kind == "float"]
ML_DTYPES_FLOATS = [
    n for n, f in fmtsim.FORMATS.items() if f.kind == "float" and f.ml_dtype is not None
]


@pytest.fixture(scope="session")
def rng():
    return np.random.default_rng(20261129)
