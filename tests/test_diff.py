"""fmtsim diff: the divergence table, checked against ml_dtypes itself."""


from fmtsim.cli import main
from fmtsim.conformance.diff import DIVERGENCE_SET, diff_rows


def test_ml_dtypes_profile_matches_ml_dtypes_except_named_divergences():
    headers, rows = diff_rows()
    prof = headers.index("profile ml_dtypes")
    actual = headers.index("ml_dtypes astype")
    differing = [(r[1], r[2]) for r in rows if r[actual] != "-" and r[prof] != r[actual]]
    # exactly the two known ml_dtypes divergences: float64 double rounding, E8M0 subnormal input
    assert differing == [("e4m3", repr(1.0625 + 2.0**-40)), ("e8m0", repr(1.2 * 2.0**-127))]
    assert all("!" in r[0] for r in rows if (r[1], r[2]) in differing)


def test_profiles_disagree_where_spec_notes_say():
    headers, rows = diff_rows()
    by = {(r[1], r[2]): r for r in rows}
    ocp, ptx, mld = (headers.index(f"profile {p}") for p in ("ocp", "ptx", "ml_dtypes"))
    assert by[("e2m1", "nan")][ptx].startswith("0x07") and by[("e2m1", "nan")][mld].startswith("0x08")
    assert by[("e2m1", "nan")][ocp].startswith("error")
    assert by[("e5m2", "nan")][ptx].startswith("0x7F") and by[("e5m2", "nan")][mld].startswith("0x7E")
    assert by[("e8m0", "3.0")][ocp].startswith("0x80") and by[("e8m0", "3.0")][mld].startswith("0x81")
    assert by[("e8m0", "3.0")][ptx].startswith("0x81")  # cvt.rp
    assert len(rows) == len(DIVERGENCE_SET)


def test_cli_diff(capsys):
    assert main(["diff"]) == 0
    out = capsys.readouterr().out
    assert "profile ptx" in out and "e5m2fnuz" in out
    assert main(["diff", "5", "0.25", "--format", "e2m1", "--profile", "ocp"]) == 0
    assert "0x06 (4)" in capsys.readouterr().out
    assert main(["diff", "5"]) == 2
