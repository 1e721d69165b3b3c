"""Write the published PAR sheets (docs/par/*.md, docs/par/README.md) and the house-edge plot.

``make par-sheets`` writes the Markdown (``gnau par --markdown`` for each published rule set,
plus the summary table); ``make par-plot`` draws docs/par/house-edge.png with matplotlib (the
[evidence] extra). tests/rules/test_par_sheets.py regenerates the Markdown and fails on any
difference, so rerun this after any change to the rules or the sheet's format.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gnau_service.cli.par_commands import published_sheets, write_published

DOCS = Path(__file__).resolve().parents[1] / "docs" / "par"


def plot(path: Path) -> None:
    """A bar chart of the house edge of every published rule set."""
    import matplotlib  # noqa: PLC0415  (the optional [evidence] extra)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    sheets = published_sheets()
    names = [stem for stem, _, _ in sheets]
    edges = [100 * float(sheet.house_edge) for _, _, sheet in sheets]
    figure, axes = plt.subplots(figsize=(9, 4.5), layout="constrained")
    bars = axes.barh(names[::-1], edges[::-1], color="#4a6fa5")
    axes.bar_label(bars, labels=[f"{edge:.3f}%" for edge in edges[::-1]], padding=3, fontsize=8)
    axes.set_xlabel("house edge per unit stake (%), exact")
    axes.set_title("Gnau: house edge by rule set (default and each single-rule change)")
    axes.set_xlim(0, max(edges) * 1.18)
    # A fixed date-free PNG: matplotlib writes no timestamp with metadata={"Software": None}.
    figure.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(figure)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plot", action="store_true", help="draw docs/par/house-edge.png")
    args = parser.parse_args()
    if args.plot:
        plot(DOCS / "house-edge.png")
        print(DOCS / "house-edge.png")
        return
    for path in write_published(DOCS):
        print(path)


if __name__ == "__main__":
    main()
