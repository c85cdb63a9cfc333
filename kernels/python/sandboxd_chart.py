"""A matplotlib figure told as compact text: titles, axes (labels, limits,
scales), each series with its label and a few of its points, and the
legend. It goes beside the figure's PNG, for a reader that cannot see the
picture; every list is capped so a big chart stays a short paragraph.
Called after the figure was drawn (tick labels exist then)."""

MAX_AXES = 6
MAX_SERIES = 8  # per axes
MAX_POINTS = 6  # shown of each series (first, evenly spaced, last)
MAX_BARS = 12
MAX_TEXT = 3000


def describe(fig):
    lines = []
    sup = getattr(fig, "_suptitle", None)
    head = "[chart]"
    if sup is not None and sup.get_text():
        head += " %s" % _q(sup.get_text())
    lines.append(head)
    axes = [ax for ax in fig.axes if ax.get_visible()]
    for i, ax in enumerate(axes[:MAX_AXES]):
        lines.extend(_axes(ax, i + 1 if len(axes) > 1 else None))
    if len(axes) > MAX_AXES:
        lines.append("(%d more axes)" % (len(axes) - MAX_AXES))
    text = "\n".join(lines)
    if len(text) > MAX_TEXT:
        text = text[:MAX_TEXT] + "\n(... chart text cut)"
    return text


def _axes(ax, n):
    out = []
    title = " / ".join(t for t in (ax.get_title("left"), ax.get_title(), ax.get_title("right")) if t)
    name = "axes %d" % n if n else "axes"
    out.append("%s%s" % (name, (": " + _q(title)) if title else ""))
    for which in ("x", "y"):
        axis = getattr(ax, which + "axis")
        label = axis.get_label().get_text()
        lo, hi = getattr(ax, "get_%slim" % which)()
        scale = getattr(ax, "get_%sscale" % which)()
        cats = _categories(ax, which)
        part = "  %s: %s" % (which, _q(label) if label else "(no label)")
        if cats:
            part += " categories %s" % _list(cats, MAX_BARS)
        else:
            part += " from %s to %s" % (_n(lo), _n(hi))
        if scale != "linear":
            part += " (%s scale)" % scale
        out.append(part)
    series = []
    for line in ax.get_lines():
        series.append(_line(line))
    for c in ax.containers:
        s = _bars(ax, c)
        if s:
            series.append(s)
    for coll in ax.collections:
        s = _collection(coll)
        if s:
            series.append(s)
    wedges = [p for p in ax.patches if type(p).__name__ == "Wedge"]
    if wedges:
        series.append(_pie(wedges))
    for im in ax.images:
        arr = im.get_array()
        shape = "x".join(str(d) for d in getattr(arr, "shape", ())) or "?"
        series.append("image %s" % shape)
    for s in series[:MAX_SERIES]:
        out.append("  " + s)
    if len(series) > MAX_SERIES:
        out.append("  (%d more series)" % (len(series) - MAX_SERIES))
    if not series:
        out.append("  (no data)")
    leg = ax.get_legend()
    if leg is not None:
        names = [t.get_text() for t in leg.get_texts()]
        if names:
            out.append("  legend: %s" % ", ".join(_q(s) for s in names[:MAX_SERIES]))
    return out


def _label(artist, kind):
    label = artist.get_label()
    if not label or label.startswith("_"):
        return kind
    return "%s %s" % (kind, _q(label))


def _line(line):
    xs, ys = list(line.get_xdata()), list(line.get_ydata())
    return "%s, %d points: %s" % (_label(line, "line"), len(ys), _points(xs, ys))


def _bars(ax, container):
    patches = getattr(container, "patches", None)
    if not patches or type(container).__name__ != "BarContainer":
        return None
    horizontal = getattr(container, "orientation", "vertical") == "horizontal"
    cats = _categories(ax, "y" if horizontal else "x")
    items = []
    # Bars side by side with no gap are a histogram's bins: told by range.
    binned = not cats and len(patches) > 1 and all(
        abs(_start(a, horizontal) + _extent(a, horizontal) - _start(b, horizontal)) < 1e-9 * max(1.0, abs(_extent(a, horizontal)))
        for a, b in zip(patches, patches[1:]))
    for p in patches[:MAX_BARS]:
        start, extent = _start(p, horizontal), _extent(p, horizontal)
        val = p.get_width() if horizontal else p.get_height()
        if binned:
            where = "[%s, %s)" % (_n(start), _n(start + extent))
        else:
            where = _category_at(cats, start + extent / 2) or _n(start + extent / 2)
        items.append("%s=%s" % (where, _n(val)))
    more = " (%d more)" % (len(patches) - MAX_BARS) if len(patches) > MAX_BARS else ""
    kind = "bars (horizontal)" if horizontal else "bars"
    named = container
    if (container.get_label() or "_").startswith("_") and patches:
        named = patches[0]  # hist() puts its label on the first bar
    return "%s, %d bars: %s%s" % (_label(named, kind), len(patches), ", ".join(items), more)


def _start(p, horizontal):
    return p.get_y() if horizontal else p.get_x()


def _extent(p, horizontal):
    return p.get_height() if horizontal else p.get_width()


def _collection(coll):
    kind = type(coll).__name__
    if kind == "PathCollection":
        pts = coll.get_offsets()
        xs = [float(p[0]) for p in pts]
        ys = [float(p[1]) for p in pts]
        return "%s, %d points: %s" % (_label(coll, "scatter"), len(xs), _points(xs, ys))
    if kind in ("PolyCollection", "FillBetweenPolyCollection"):
        return _label(coll, "filled area")
    if kind == "LineCollection":
        return "%s, %d segments" % (_label(coll, "lines"), len(coll.get_segments()))
    if kind == "QuadMesh":
        return _label(coll, "mesh")
    return None


def _pie(wedges):
    total = sum(abs(w.theta2 - w.theta1) for w in wedges) or 1
    items = []
    for w in wedges[:MAX_BARS]:
        share = abs(w.theta2 - w.theta1) / total * 100
        label = w.get_label()
        items.append("%s=%.1f%%" % (label if label and not label.startswith("_") else "?", share))
    return "pie, %d wedges: %s" % (len(wedges), ", ".join(items))


def _categories(ax, which):
    """The category names of a categorical axis (bar(['a', 'b'], ...)), or []."""
    axis = getattr(ax, which + "axis")
    units = axis.get_units()
    mapping = getattr(units, "_mapping", None)
    if not mapping:
        return []
    return [(str(k), float(v)) for k, v in mapping.items()]


def _category_at(cats, pos):
    for name, v in cats:
        if abs(v - pos) < 0.5:
            return name
    return None


def _points(xs, ys):
    n = min(len(xs), len(ys))
    if n == 0:
        return "(empty)"
    if n <= MAX_POINTS:
        idx = list(range(n))
    else:
        step = (n - 1) / (MAX_POINTS - 1)
        idx = sorted({round(i * step) for i in range(MAX_POINTS)})
    shown = ", ".join("(%s, %s)" % (_n(xs[i]), _n(ys[i])) for i in idx)
    if n > MAX_POINTS:
        shown += "; y from %s to %s" % (_n(min(_finite(ys), default=float("nan"))), _n(max(_finite(ys), default=float("nan"))))
    return shown


def _finite(vals):
    out = []
    for v in vals:
        try:
            f = float(v)
        except (TypeError, ValueError):
            continue
        if f == f and f not in (float("inf"), float("-inf")):
            out.append(f)
    return out


def _n(v):
    try:
        f = float(v)
    except (TypeError, ValueError):
        return str(v)
    if f != f or f in (float("inf"), float("-inf")):
        return str(f)
    if f == int(f) and abs(f) < 1e15:
        return str(int(f))
    return "%.4g" % f


def _list(names, cap):
    names = [n for n, _ in names]
    s = ", ".join(names[:cap])
    if len(names) > cap:
        s += ", ... (%d in all)" % len(names)
    return s


def _q(s):
    return '"%s"' % str(s).replace("\n", " ")
