"""A matplotlib figure as chart data, in the shape E2B's code interpreter
gives its results' `chart`: a line, scatter, bar or pie chart with its
titles, axes and elements; a figure of several axes is a "superchart" of
one chart each. Called after the figure was drawn (tick labels exist).
Every list is capped so a big plot stays a reasonable message."""

from sandboxd_chart import _categories, _category_at

MAX_POINTS = 10000  # per series
MAX_ELEMENTS = 1000  # bars, wedges, series


def chart_data(fig):
    sup = getattr(fig, "_suptitle", None)
    title = sup.get_text() if sup is not None else ""
    charts = [_chart(ax) for ax in fig.axes if ax.get_visible()]
    if len(charts) == 1:
        if title and not charts[0]["title"]:
            charts[0]["title"] = title
        return charts[0]
    if not charts:
        return {"type": "unknown", "title": title, "elements": []}
    return {"type": "superchart", "title": title, "elements": charts}


def _chart(ax):
    title = ax.get_title()
    wedges = [p for p in ax.patches if type(p).__name__ == "Wedge"]
    if wedges:
        return {"type": "pie", "title": title, "elements": [
            {"label": _name(w.get_label()), "angle": abs(w.theta2 - w.theta1), "radius": w.r} for w in wedges[:MAX_ELEMENTS]]}
    bars = [c for c in ax.containers if type(c).__name__ == "BarContainer"]
    if bars:
        return _bar(ax, title, bars)
    scatter = [c for c in ax.collections if type(c).__name__ == "PathCollection"]
    lines = list(ax.get_lines())
    if lines and not scatter:
        elements = [{"label": _name(ln.get_label()), "points": _points(ln.get_xdata(), ln.get_ydata())} for ln in lines[:MAX_ELEMENTS]]
        return dict(_planar(ax, title), type="line", elements=elements)
    if scatter and not lines:
        elements = []
        for c in scatter[:MAX_ELEMENTS]:
            offs = c.get_offsets()
            elements.append({"label": _name(c.get_label()), "points": _points([p[0] for p in offs], [p[1] for p in offs])})
        return dict(_planar(ax, title), type="scatter", elements=elements)
    return {"type": "unknown", "title": title, "elements": []}


def _planar(ax, title):
    out = {"title": title, "x_label": ax.get_xlabel() or None, "y_label": ax.get_ylabel() or None, "x_unit": None, "y_unit": None}
    for which in ("x", "y"):
        cats = _categories(ax, which)
        out[which + "_scale"] = "categorical" if cats else getattr(ax, "get_%sscale" % which)()
        out[which + "_ticks"] = [_num(t) for t in getattr(ax, "get_%sticks" % which)()]
        out[which + "_tick_labels"] = [t.get_text() for t in getattr(ax, "get_%sticklabels" % which)()]
    return out


def _bar(ax, title, containers):
    horizontal = getattr(containers[0], "orientation", "vertical") == "horizontal"
    cats = _categories(ax, "y" if horizontal else "x")
    elements = []
    for i, c in enumerate(containers):
        group = _name(c.get_label()) or "Group %d" % i
        for p in c.patches:
            if len(elements) >= MAX_ELEMENTS:
                break
            start = p.get_y() if horizontal else p.get_x()
            extent = p.get_height() if horizontal else p.get_width()
            value = p.get_width() if horizontal else p.get_height()
            mid = start + extent / 2
            label = _category_at(cats, mid) if cats else None
            elements.append({"label": label if label is not None else _fmt(mid), "value": _num(value), "group": group})
    x_label, y_label = ax.get_xlabel(), ax.get_ylabel()
    return {"type": "bar", "title": title, "x_label": x_label or None, "y_label": y_label or None,
            "x_unit": None, "y_unit": None, "elements": elements}


def _points(xs, ys):
    xs, ys = list(xs), list(ys)
    n = min(len(xs), len(ys), MAX_POINTS)
    return [[_num(xs[i]), _num(ys[i])] for i in range(n)]


def _num(v):
    """A plain number where v is one (NaN and infinities become None), else its text."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return str(v)
    if f != f or f in (float("inf"), float("-inf")):
        return None
    return int(f) if f == int(f) and abs(f) < 1e15 else f


def _fmt(v):
    n = _num(v)
    return str(n)


def _name(label):
    """A series' label; matplotlib's own names for unlabelled artists
    ("_child0") are no label."""
    label = label if isinstance(label, str) else str(label)
    return "" if label.startswith("_") else label
