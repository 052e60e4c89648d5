"""Conformance: what other implementations do, where they differ, and how to check them."""
