"""C++ sources fmtsim compiles on first use against a vendor's own headers (package data).

Each shim only loops over arrays and calls the vendor's conversion functions; the
headers are the user's (a CUDA toolkit, NVIDIA's pip wheels, a ROCm install), never
fmtsim's. :mod:`fmtsim.conformance.shim_build` compiles and caches them.
"""
