"""The growth rule of the scale rows (issue 17): per-unit cost, exponent, verdict.

Pure functions, no measuring: ``benchmarks/scale.py`` measures a figure at
three sizes and hands the figures here; ``tests/test_bench_scale.py``
checks the rule on figures whose growth is known. The rule: the exponent
``k = log(total_last / total_first) / log(size_last / size_first)`` of
``total ~ size**k``; ``linear`` when ``|k - 1| <= LINEAR_TOLERANCE``,
``sub-linear`` below, ``super-linear`` above; ``flat`` when ``k <=
FLAT_EXPONENT`` (for a figure that should not grow with the size at all).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

# |k - 1| within this is "linear" (k: growth exponent of the total).
LINEAR_TOLERANCE = 0.2
# k at or below this is "flat": the total does not grow with the size.
FLAT_EXPONENT = 0.2


# -- growth --------------------------------------------------------------------


@dataclass(frozen=True)
class Growth:
    """How a figure's cost grows over the sizes it was measured at.

    ``per_unit`` is each total divided by its size, ``ratios`` each
    per-unit cost over the smallest size's, ``exponent`` the ``k`` of
    ``total ~ size**k`` from the first to the last size (None when a total
    is not positive, e.g. an RSS difference lost in noise), ``verdict``
    "linear", "sub-linear", "super-linear" or "undetermined".
    """

    sizes: tuple[int, ...]
    totals: tuple[float, ...]
    per_unit: tuple[float, ...]
    ratios: tuple[float, ...]
    exponent: float | None
    verdict: str

    @property
    def flat(self) -> bool:
        """The total did not grow with the size (``k <= FLAT_EXPONENT``)."""
        return self.exponent is not None and self.exponent <= FLAT_EXPONENT


def growth(sizes: Sequence[int], totals: Sequence[float]) -> Growth:
    """Per-unit costs, their ratios to the smallest size, the exponent and the verdict.

    The verdict reads the exponent of the totals between the smallest and
    the largest size, so two runs over different spans (4x for sessions,
    10x for the catalog) are judged by the same rule; the ratios are kept
    so the middle size can be read too.

    Raises:
        ValueError: fewer than two sizes, sizes not strictly increasing, or
            sizes and totals of different lengths: no growth can be read.
    """
    if len(sizes) != len(totals):
        raise ValueError(f"{len(sizes)} sizes but {len(totals)} totals")
    if len(sizes) < 2:
        raise ValueError("growth needs at least two sizes")
    if any(b <= a for a, b in itertools.pairwise(sizes)) or sizes[0] <= 0:
        raise ValueError(f"sizes must be positive and increasing: {list(sizes)}")
    per_unit = tuple(total / size for total, size in zip(totals, sizes, strict=True))
    if any(total <= 0 for total in totals):
        ratios = tuple(math.nan for _ in totals)
        return Growth(tuple(sizes), tuple(totals), per_unit, ratios, None, "undetermined")
    ratios = tuple(cost / per_unit[0] for cost in per_unit)
    exponent = math.log(totals[-1] / totals[0]) / math.log(sizes[-1] / sizes[0])
    if exponent > 1 + LINEAR_TOLERANCE:
        verdict = "super-linear"
    elif exponent < 1 - LINEAR_TOLERANCE:
        verdict = "sub-linear"
    else:
        verdict = "linear"
    return Growth(tuple(sizes), tuple(totals), per_unit, ratios, exponent, verdict)


def row(
    name: str,
    unit: str,
    sizes: Sequence[int],
    totals: Sequence[float],
    *,
    per: str,
    target: str = "",
    ok: Callable[[Growth], bool] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One scale row: figures, growth, verdict, and pass/miss at the largest size.

    ``totals`` are in ``unit`` (the whole figure at each size); ``per`` names
    the unit of size (session, stream, backend, tool) for the per-unit
    column; ``ok`` decides the target from the growth (its totals and
    per-unit costs), None for a row without a target.
    """
    measured = growth(sizes, totals)
    return {
        "name": name,
        "unit": unit,
        "per": per,
        **asdict(measured),
        "target": target,
        "pass": None if ok is None else ok(measured),
        **(extra or {}),
    }


# -- report --------------------------------------------------------------------


def _figure(value: float, unit: str) -> str:
    if unit == "s":
        return f"{value:,.2f} s"
    if abs(value) >= 100:
        return f"{value:,.0f} {unit}"
    return f"{value:,.1f} {unit}"


def _per_unit(value: float, unit: str, per: str) -> str:
    scaled, shown = value, unit
    if unit == "KiB" and abs(value) < 1:
        scaled, shown = value * 1024, "B"
    elif unit in ("ms", "s") and abs(value * (1000 if unit == "s" else 1)) < 1:
        scaled, shown = value * (1e6 if unit == "s" else 1e3), "µs"
    elif unit == "s":
        scaled, shown = value * 1e3, "ms"
    return f"{scaled:,.2f} {shown}/{per}"


def format_table(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The rows as text lines: figures, per-unit costs, growth, verdict, target."""
    lines = []
    for r in rows:
        sizes = " / ".join(f"{s:,}" for s in r["sizes"])
        figures = " / ".join(_figure(t, r["unit"]) for t in r["totals"])
        per_unit = " / ".join(_per_unit(c, r["unit"], r["per"]) for c in r["per_unit"])
        ratios = " / ".join("-" if math.isnan(x) else f"{x:.2f}x" for x in r["ratios"])
        k = "-" if r["exponent"] is None else f"{r['exponent']:.2f}"
        lines.append(f"{r['name']} at {sizes}")
        lines.append(f"    figure:   {figures}")
        lines.append(f"    per unit: {per_unit} (growth {ratios})")
        lines.append(f"    verdict:  {r['verdict']} (k = {k})")
        if "ratio_to_direct" in r:
            shown = " / ".join(f"{x:.2f}x" for x in r["ratio_to_direct"])
            lines.append(f"    ÷ direct: {shown}")
        if r["target"]:
            word = "PASS" if r["pass"] else "MISS"
            lines.append(f"    target:   {r['target']} at {r['sizes'][-1]:,}: {word}")
        if r.get("note"):
            lines.append(f"    note:     {r['note']}")
    return lines
