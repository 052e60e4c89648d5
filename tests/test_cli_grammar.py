"""One CLI grammar: every option and positional has help, long choice lists are named by `fmtsim
list`, repeated values take a repeated option (nothing swallows the positionals after it)."""

import argparse

import pytest

from fmtsim import cli
from fmtsim.cli import LISTS, main


def _actions(parser, path=("fmtsim",)):
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sub in a.choices.items():
                yield from _actions(sub, (*path, name))
        elif not isinstance(a, (argparse._HelpAction, argparse._VersionAction)):
            yield " ".join(path), a


def test_every_option_has_help_and_long_choices_point_at_list():
    missing, inline = [], []
    for where, a in _actions(cli.build_parser()):
        name = "/".join(a.option_strings) or a.dest
        if not a.help:
            missing.append(f"{where} {name}")
        if a.choices is not None and len(list(a.choices)) > 12:
            if a.metavar is None:  # argparse would print every name inline in the usage line
                inline.append(f"{where} {name}")
            elif "fmtsim list" not in a.help:
                inline.append(f"{where} {name}: help does not say where the names are")
    assert not missing, missing
    assert not inline, inline


@pytest.mark.parametrize("what,name", [("formats", "e4m3fnuz"), ("profiles", "ptx"), ("rounding", "rna"),
                                       ("overflow", "satsym"), ("nan", "signed_all_ones"),
                                       ("producers", "deepseek-fp8-block"), ("units", "sm90_wgmma_fp8"),
                                       ("implementations", "apfloat")])
def test_list_names_every_value_an_option_takes(capsys, what, name):
    assert what in LISTS
    assert main(["list", what]) == 0
    rows = [ln.split()[0] for ln in capsys.readouterr().out.splitlines()[2:] if ln.strip()]
    assert name in rows
    parser_choices = {"rounding": cli.ROUNDING_MODES, "overflow": cli.OVERFLOW_MODES, "nan": cli.NAN_MODES,
                      "profiles": list(cli.PROFILES)}.get(what)
    if parser_choices is not None:
        assert rows == list(parser_choices)  # every value the option takes, and only those


def test_nan_modes_are_each_described(capsys):
    assert main(["list", "nan"]) == 0
    lines = capsys.readouterr().out.splitlines()[2:]
    assert all(len(ln.split(None, 1)) == 2 for ln in lines), [ln for ln in lines if len(ln.split(None, 1)) < 2]


def test_diff_profiles_repeat_and_leave_the_values_alone(capsys):
    """`diff --profiles ptx ocp 5 7` swallowed 5 and 7 as profile names; --profile repeats."""
    assert main(["diff", "--profile", "ptx", "--profile", "ocp", "5", "7", "--format", "e2m1"]) == 0
    out = capsys.readouterr().out
    assert "ptx" in out and "ocp" in out and "torchao" not in out
    with pytest.raises(SystemExit):
        main(["diff", "--profiles", "ptx", "5"])


def test_conform_takes_format_as_formats(capsys):
    assert main(["conform", "--quick", "--format", "e4m3"]) == 0
    one = capsys.readouterr().out
    assert main(["conform", "--quick", "--formats", "e4m3"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].split("(")[0] == one.splitlines()[-1].split("(")[0]


def test_probe_has_subcommands(capsys):
    with pytest.raises(SystemExit) as e:
        main(["probe", "infer"])
    assert e.value.code == 2 and "results" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["probe", "gen"])
    assert e.value.code == 2 and "-o/--output" in capsys.readouterr().err


def test_conform_reports_progress_per_implementation():
    from fmtsim.conformance.run import run

    seen = []
    run(("fmtsim", "ml_dtypes"), ["e4m3"], big=False, progress=lambda d, t, n: seen.append((d, t, n)))
    assert seen == [(0, 2, "fmtsim"), (1, 2, "ml_dtypes"), (2, 2, "")]


def test_diff_prints_exact_values_as_encode_does(capsys):
    assert main(["diff", "0.1", "--format", "e4m3", "--profile", "ocp"]) == 0
    assert "0x1D (0.1015625)" in capsys.readouterr().out  # not %g's 0.101562
