"""The pictures of ``fmtsim compare`` (the ``plot`` extra: matplotlib), and the self-contained
HTML report that holds them with the tables.

- ``pareto.png``: every ranked scheme's overall MSE against its bits per weight, the Pareto
  front (no scheme both smaller and more accurate) joined;
- ``heatmap.png``: SQNR in dB, tensors x schemes;
- ``histogram.png``: the weights of the largest tensor, with the grid of values each
  per-tensor scheme can represent drawn over it (its codes decoded times its scale);
- ``clipping.png``: the clipping U-curve of one scheme on that tensor (``--clip-curve``; by
  default the per-tensor scheme of fewest bits): MSE against the clip threshold as a fraction
  of max|w| (the search ``+clip=mse`` makes).

Figures are written through a temporary name and a rename (fmtsim.fileio), like every output.
"""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path
from typing import Any

import numpy as np

from ..fileio import atomic_write, check_replaceable
from . import Scheme, _quantize, parse_scheme
from .source import Report

__all__ = ["figures", "write_figures", "write_report", "PLOT_INSTALL", "FIGURES"]

PLOT_INSTALL = 'pip install "fmtsim[plot]" (matplotlib)'
#: the files --plots writes (histogram and clipping when a tensor has values to draw)
FIGURES = ("pareto.png", "heatmap.png", "histogram.png", "clipping.png")


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise ValueError(f"figures need matplotlib ({type(e).__name__}: {e}): {PLOT_INSTALL}") from None
    return plt


def pareto_front(points: list[tuple[float, float, str]]) -> list[tuple[float, float, str]]:
    """The (bits, mse, name) points no other point beats on both (ties: fewer bits first)."""
    front = []
    best = float("inf")
    for p in sorted(points, key=lambda q: (q[0], q[1], q[2])):
        if p[1] < best:
            front.append(p)
            best = p[1]
    return front


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    # no timestamps or software tags in the file: the same report gives the same bytes
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight", metadata={"Software": None})
    return buf.getvalue()


def _largest(report: Report, load: Any) -> tuple[str, np.ndarray] | None:
    if not report.tensors:
        return None
    t = max(report.tensors, key=lambda t: (int(np.prod(t.shape)), t.name))
    return t.name, load(t.name)


def _scheme(spec: str) -> Scheme | None:
    """The scheme a row names, or None for a row that is no scheme (a checkpoint's stored one)."""
    return None if spec.startswith("stored: ") else parse_scheme(spec)


def _grid(x: np.ndarray, s: Scheme | None) -> np.ndarray | None:
    """The values a per-tensor scheme without a transform can give ``x``: every code decoded
    times the tensor's scale (None for any other scheme: its grid is not one line)."""
    from ..codec import decode
    from ..formats import get_format

    if s is None or s.transforms:
        return None
    amax = float(np.max(np.abs(x))) if x.size else 0.0
    if amax == 0:
        return None
    if s.family == "int" and s.option("granularity", "tensor") == "tensor" and s.option("mode", "sym") == "sym":
        b = int(s.name[3:])
        q = 2 ** (b - 1) - 1
        return np.arange(-q, q + 1) * (amax / q)
    if s.family == "float" and s.option("granularity", "tensor") == "tensor":
        f = get_format(s.name)
        v = np.asarray(decode(np.arange(f.n_codes), f, np.float64))
        v = np.unique(v[np.isfinite(v)])
        return v * float(np.float32(amax / float(f.max_finite)))
    return None


def figures(report: Report, load: Any, clip_scheme: str | None = None) -> dict[str, bytes]:
    """name -> PNG bytes. ``load(name)`` gives a tensor's values (float64) for the histogram and
    the clipping curve, which are drawn for the largest tensor."""
    plt = _pyplot()
    out: dict[str, bytes] = {}
    rows = report.overall()

    fig, ax = plt.subplots(figsize=(7, 4.5))
    pts = [(r["bits_per_weight"], r["mse"], r["scheme"]) for r in rows if r["mse"] > 0]
    for b, m, name in pts:
        ax.scatter([b], [m], s=18)
        ax.annotate(name, (b, m), fontsize=7, xytext=(3, 3), textcoords="offset points")
    front = pareto_front(pts)
    if front:
        ax.plot([p[0] for p in front], [p[1] for p in front], "k--", lw=0.8, label="Pareto front")
        ax.legend(fontsize=8)
    ax.set_yscale("log")
    ax.set_xlabel("bits per weight (scales included)")
    ax.set_ylabel("MSE over all chosen weights")
    ax.set_title("error against size")
    out["pareto.png"] = _png(fig)
    plt.close(fig)

    ranked = [r["scheme"] for r in rows]
    if ranked and report.tensors:
        grid = np.full((len(report.tensors), len(ranked)), np.nan)
        for i, t in enumerate(report.tensors):
            for j, spec in enumerate(ranked):
                if spec in t.totals:
                    v = t.totals[spec].metrics()["sqnr_db"]
                    grid[i, j] = v if np.isfinite(v) else np.nan
        fig, ax = plt.subplots(figsize=(max(5.0, 0.45 * len(ranked) + 3), max(2.5, 0.3 * len(report.tensors) + 1.5)))
        im = ax.imshow(grid, aspect="auto", cmap="viridis")
        ax.set_xticks(range(len(ranked)), ranked, rotation=60, ha="right", fontsize=7)
        ax.set_yticks(range(len(report.tensors)), [t.name for t in report.tensors], fontsize=7)
        fig.colorbar(im, ax=ax, label="SQNR (dB)")
        ax.set_title("SQNR by tensor and scheme")
        out["heatmap.png"] = _png(fig)
        plt.close(fig)

    big = _largest(report, load)
    if big is not None:
        name, x = big
        grids = [(spec, g) for spec in report.schemes if (g := _grid(x, _scheme(spec))) is not None][:4]
        fig, axes = plt.subplots(2, 1, figsize=(7, 4.5 + 0.3 * len(grids)), sharex=True,
                                 gridspec_kw={"height_ratios": [3, max(1, len(grids))]})
        ax, rug = axes
        ax.hist(x.reshape(-1), bins=200, color="0.55", log=True)
        ax.set_title(f"{name}: weights, and the values per-tensor schemes can represent")
        for i, (_spec, g) in enumerate(grids):  # one row of ticks per scheme: its grid's spacing at a glance
            rug.plot(g, np.full(g.shape, i), "|", color=f"C{i}", markersize=9)
        rug.set_yticks(range(len(grids)), [spec for spec, _ in grids], fontsize=8)
        rug.set_ylim(-0.7, max(len(grids), 1) - 0.3)
        rug.set_xlabel("weight")
        out["histogram.png"] = _png(fig)
        plt.close(fig)

        # default: the per-tensor scheme of fewest bits, where clipping trades the most (the seed
        # post's per-tensor INT4), else the best-ranked scheme without a transform
        per_tensor = [r for r in rows if _grid(x, _scheme(r["scheme"])) is not None]
        plain = [r["scheme"] for r in rows if (sc := _scheme(r["scheme"])) is not None and not sc.transforms]
        spec = clip_scheme or (min(per_tensor, key=lambda r: (r["bits_per_weight"], r["scheme"]))["scheme"]
                               if per_tensor else (plain[0] if plain else None))
        if spec is not None:
            s = parse_scheme(spec)
            amax = float(np.max(np.abs(x))) if x.size else 0.0
            if amax > 0 and not s.transforms:
                fr = np.geomspace(1.0, 1e-3, 40)
                mse = [float(np.mean((_quantize(np.clip(x, -amax * f, amax * f), s)[0] - x) ** 2)) for f in fr]
                fig, ax = plt.subplots(figsize=(7, 4))
                ax.plot(fr, mse, marker=".")
                ax.set_xscale("log")
                ax.set_yscale("log")
                best = int(np.argmin(mse))
                ax.axvline(fr[best], ls="--", color="k", lw=0.8, label=f"least MSE at {fr[best]:.3g} max|w|")
                ax.legend(fontsize=8)
                ax.set_xlabel("clip threshold / max|w|")
                ax.set_ylabel("MSE")
                ax.set_title(f"{name}: clipping under {spec} (range against resolution)")
                out["clipping.png"] = _png(fig)
                plt.close(fig)
    return out


def _out_dir(directory: str | Path, what: str) -> Path:
    d = Path(directory)
    if d.exists() and not d.is_dir():
        raise ValueError(f"{what} {d}: exists and is not a directory")
    d.mkdir(parents=True, exist_ok=True)
    return d


def write_figures(figs: dict[str, bytes], directory: str | Path, inputs: list[Path]) -> list[Path]:
    d = _out_dir(directory, "--plots")
    for name in figs:  # every target checked before the first is written
        check_replaceable(d / name, inputs, "--plots")
    for name, data in figs.items():
        atomic_write(d / name, data, inputs, "--plots")
    return [d / n for n in figs]


def write_report(report: Report, figs: dict[str, bytes], directory: str | Path, inputs: list[Path],
                 table_text: str) -> Path:
    """``DIR/index.html``: the ranked table, every tensor's rows and the figures (embedded)."""
    from .cli import to_csv

    d = _out_dir(directory, "--report")
    target = d / "index.html"
    check_replaceable(target, inputs, "--report")
    esc = html.escape
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>fmtsim compare</title>",
             "<style>body{font-family:sans-serif;margin:2em;max-width:75em}table{border-collapse:collapse;"
             "font-size:0.85em}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}"
             "td:first-child,th:first-child{text-align:left}pre{font-size:0.8em}</style></head><body>",
             f"<h1>fmtsim compare: {esc(report.source)}</h1>",
             "<p>Every quantization is fmtsim's own bit-exact one; every metric is computed in float64 over "
             "the chosen weights. Overall rows weigh each tensor by its size.</p>",
             f"<h2>Ranked</h2><pre>{esc(table_text)}</pre>"]
    for name, data in figs.items():
        parts.append(f"<h2>{esc(name[:-4])}</h2><img alt='{esc(name)}' src='data:image/png;base64,"
                     f"{base64.b64encode(data).decode()}'>")
    rows = list(csvrows(to_csv(report)))
    parts.append("<h2>Every tensor and scheme</h2><table>")
    parts.append("<tr>" + "".join(f"<th>{esc(h)}</th>" for h in rows[0]) + "</tr>")
    for r in rows[1:]:
        parts.append("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>")
    parts.append("</table></body></html>\n")
    atomic_write(target, "".join(parts), inputs, "--report")
    return target


def csvrows(text: str) -> list[list[str]]:
    import csv

    return list(csv.reader(io.StringIO(text)))
