"""Chapter 6's live plot costs what it shows, not the run's history (issue 27): bounded buckets, bounded messages,
and no message sent faster than the page acknowledges it."""
import math
import random

import numpy as np
import pytest

from course_utils.widgets.decimate import LIMIT, Buckets, log_decimate
from course_utils.widgets.live_plot import ACK_TIMEOUT_S, WINDOW, LivePlot, Panel, Series


def _curve(n, seed=0):
    rng = random.Random(seed)
    return [(step, math.exp(-step / 5000) + rng.random()) for step in range(1, n + 1)]


def test_a_short_curve_is_kept_point_by_point():
    b = Buckets()
    points = _curve(200)
    for x, y in points:
        b.add(x, y)
    assert b.all() == [[float(x), y] for x, y in points] and b.width == 1


@pytest.mark.parametrize("n", [257, 1000, 50_000, 200_000])
def test_a_long_curve_stays_bounded_and_its_buckets_are_exact_summaries(n):
    """Oracle: NumPy over the same points grouped by the bucket width the curve ended with."""
    b = Buckets()
    points = _curve(n)
    for x, y in points:
        b.add(x, y)
    assert LIMIT // 2 <= len(b) <= LIMIT and b.points == n
    xs, ys = np.array([p[0] for p in points], float), np.array([p[1] for p in points])
    keys = (xs // b.width).astype(int)
    for bucket, key in zip(b.all(), np.unique(keys)):
        mine = keys == key
        assert bucket[0] == pytest.approx(xs[mine].mean())
        if mine.sum() > 1:
            assert bucket[1:] == pytest.approx([ys[mine].mean(), ys[mine].min(), ys[mine].max()])
    assert min(bk[2] for bk in b.all() if len(bk) == 4) == pytest.approx(ys.min())   # no extreme is lost


def test_changed_buckets_are_few_and_a_merge_resends_everything():
    b = Buckets(limit=8)
    for x in range(1, 9):
        b.add(x, float(x))
    assert b.changed() == (0, [[float(x), float(x)] for x in range(1, 9)])
    b.add(9, 9.0)                               # a ninth bucket passes the limit: width 2, every bucket new
    start, buckets = b.changed()
    assert start == 0 and len(buckets) == 5 and b.width == 2
    b.add(10, 10.0)                             # a new bucket (10 // 2 = 5): only it is sent
    assert b.changed() == (5, [[10.0, 10.0]])
    b.add(11, 12.0)                             # joins it: only that bucket is sent again, now a summary
    assert b.changed() == (5, [[10.5, 11.0, 10.0, 12.0]]) and b.changed() is None


def test_gaps_survive_aggregation():
    b = Buckets(limit=4)
    for x in range(1, 40):
        b.add(x, math.nan if x > 20 else 1.0)
    assert b.all()[-1][1] is None and b.all()[0][1] == 1.0


def test_log_decimate_keeps_the_extremes_and_bounds_the_points():
    points = [(x, math.sin(x)) for x in range(1, 24_001)]
    kept = log_decimate(points, buckets=300)
    assert len(kept) <= 600 and kept[0] == points[0]
    assert min(y for _, y in kept) == min(y for _, y in points) and max(y for _, y in kept) == max(y for _, y in points)
    assert log_decimate(points[:50]) == points[:50]


def _plot(acks=True):
    plot = LivePlot([Panel("loss", (Series("loss", "train", "#000"),))])
    sent = []

    def send(content, buffers=None):
        sent.append(content)
    plot.send = send
    plot._on_message(plot, {"type": "ready"}, [])
    if acks:
        plot._on_message(plot, {"type": "ack", "seq": sent[-1]["seq"]}, [])
    return plot, sent


def test_nothing_is_sent_before_a_page_shows_the_plot():
    plot = LivePlot([Panel("loss", (Series("loss", "", "#000"),))])
    sent = []
    plot.send = lambda content, buffers=None: sent.append(content)
    for x in range(1, 1001):
        plot.add("loss", x, 1.0 / x)
        plot.flush()
    assert sent == []
    plot._on_message(plot, {"type": "ready"}, [])
    assert len(sent) == 1 and sent[0]["type"] == "reset" and len(sent[0]["series"]["loss"][1]) <= LIMIT


def test_messages_never_outrun_the_page():
    """Without acknowledgements at most WINDOW data messages leave; an ack sends what waited, merged, at once."""
    plot, sent = _plot()
    for x in range(1, 101):
        plot.add("loss", x, 1.0)
        plot.flush()
    appended = [m for m in sent if m["type"] == "append"]
    assert len(appended) == WINDOW and plot.held == 100 - WINDOW
    plot._on_message(plot, {"type": "ack", "seq": appended[0]["seq"]}, [])   # the page drew one: one more goes
    appended = [m for m in sent if m["type"] == "append"]
    assert len(appended) == WINDOW + 1 and plot.held == 0
    start, buckets = appended[-1]["series"]["loss"]
    assert start == WINDOW and len(buckets) == 100 - WINDOW          # every held point, in one message


def test_a_lost_acknowledgement_does_not_stop_the_plot_forever(monkeypatch):
    plot, sent = _plot()
    clock = [1000.0]
    monkeypatch.setattr("course_utils.widgets.live_plot.time.monotonic", lambda: clock[0])
    for x in range(1, 10):
        plot.add("loss", x, 1.0)
        plot.flush()
    before = len(sent)
    clock[0] += ACK_TIMEOUT_S + 0.1
    plot.add("loss", 10, 1.0)
    assert plot.flush() and len(sent) == before + 1


def test_every_message_stays_small_however_long_the_run():
    plot, sent = _plot()

    def ack(content, buffers=None):
        sent.append(content)
        if "seq" in content:
            plot._on_message(plot, {"type": "ack", "seq": content["seq"]}, [])
    plot.send = ack
    for x in range(1, 60_001):
        plot.add("loss", x, 1.0 + (x % 7))
        if x % 25 == 0:
            plot.flush()
    sizes = [len(m["series"]["loss"][1]) for m in sent if m.get("series")]
    assert max(sizes) <= LIMIT and np.median(sizes) <= 2 and len(plot.data["loss"]) <= LIMIT


def test_an_unchanged_boundary_is_sent_once():
    """The same grid again (a Step that moved no prediction) is not sent, so the page does not redraw it; a new one
    is, and after a clear the same grid goes again (the page forgot it)."""
    plot, sent = _plot()
    plot.set_grid(2, b"\x00\x01\x01\x00", b"\x10\x20\x30\x40")
    plot.flush()
    assert "grid" in sent[-1]
    plot._on_message(plot, {"type": "ack", "seq": sent[-1]["seq"]}, [])
    plot.set_grid(2, b"\x00\x01\x01\x00", b"\x10\x20\x30\x40")
    plot.add("loss", 1, 1.0)
    plot.flush()
    assert "grid" not in sent[-1] and "series" in sent[-1]
    plot.set_grid(2, b"\x00\x01\x01\x00", b"\x10\x20\x30\x41")
    plot.flush()
    assert "grid" in sent[-1]
    plot._on_message(plot, {"type": "ack", "seq": sent[-1]["seq"]}, [])
    plot.clear()
    plot.set_grid(2, b"\x00\x01\x01\x00", b"\x10\x20\x30\x41")
    plot.flush()
    assert sent[-2]["type"] == "reset" and "grid" in sent[-1]
