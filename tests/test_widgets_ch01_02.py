"""Chapter 1-2 views, headless: set every control, click every button, check what the view shows."""

from course_utils.chapters.ch01_pipeline import trace_pipeline
from course_utils.widgets.pipeline_view import pipeline_view
from course_utils.widgets.sampling_view import distributed, padding, padding_positions, sampling_strategies

HUGE_SEED = "99999999999999999999"


def test_pipeline_view_controls():
    v = pipeline_view(n=100, batch_size=16, shuffle=True, drop_last=False)
    assert "7 batches" in v.text() and "b7" in v.output.value
    v.drop_last.value = True
    assert "6 batches" in v.text() and "dropped" in v.output.value
    first = trace_pipeline(100, 16, True, True, epochs=2).epochs
    assert f"skipped this epoch: {sorted(first[0].skipped)}" in v.text()
    v.next_epoch.click()
    assert "epoch 2" in v.text() and f"skipped this epoch: {sorted(first[1].skipped)}" in v.text()
    v.batch_size.value = 25
    assert "epoch 1" in v.text() and "4 batches" in v.text()
    v.shuffle.value = False
    assert "batch 1: [0, 1, 2" in v.text()
    v.seed.value = "5"
    v.n.value = "10000"
    assert "invalid input" in v.text() and "examples N must be between 1 and 400" in v.message.value
    assert v.next_epoch.disabled and "opacity" in v.output.value
    v.n.value = "0"
    assert "invalid input" in v.text()
    v.n.value = "30"
    assert "1 batches, sizes [25]" in v.text() and not v.message.value and not v.next_epoch.disabled
    v.drop_last.value = False
    assert "2 batches, sizes [25, 5]" in v.text()
    assert "text/plain" in v._repr_mimebundle_()


def test_pipeline_next_epoch_does_not_retrace_history():
    """Issue 15 / review: Next epoch used to re-trace every earlier epoch; now each click is one pass."""
    v = pipeline_view(n=400, batch_size=1)
    for _ in range(15):
        v.next_epoch.click()
    assert v.epoch == 16 and v.trace.epochs[-1].epoch == 16
    expected = trace_pipeline(400, 1, True, False, epochs=16).epochs[-1]
    assert v.trace.epochs[-1] == expected


def test_pipeline_huge_seed_is_a_message():
    v = pipeline_view()
    v.seed.value = HUGE_SEED
    assert "seed must be between" in v.message.value and "Overflow" not in v.message.value


def test_sampling_view_controls():
    v = sampling_strategies(batch_size=32, n_batches=30)
    assert "weighted" in v.text() and "<svg" in v.output.value
    assert "batch (all 30)" in v.output.value
    assert all(len(c.counts) == 30 for c in v.results)
    v.batch_size.value = 64
    v.n_batches.value = 31          # more than one epoch holds: clipped, with a note
    assert "at most 16" in v.output.value and len(v.results[0].counts) == 16
    v.replacement.value = False
    assert "replacement=False" in v.text()
    before = v.text()
    v.resample.click()
    assert v.seed.value == "1" and v.text() != before
    v.batch_size.value = 1
    assert len(v.results[2].counts) == 31


def test_sampling_view_new_seed_recovers_from_a_huge_seed():
    v = sampling_strategies()
    v.seed.value = "41"
    v.seed.value = HUGE_SEED
    assert v.error and "seed" in v.message.value
    v.resample.click()
    assert v.error is None and v.seed.value == "42"


def test_padding_view_controls():
    v = padding(batch_size=16)
    plain = v.stats.waste
    v.bucketing.value = True
    assert v.stats.waste < plain and "bucketed" in v.text()
    v.batch_size.value = 1
    assert v.stats.waste == 0
    v.max_len.value = 3
    v.seed.value = "2"
    assert "3..3" in v.text() and "<svg" in v.output.value


def test_padding_view_huge_seed_never_freezes_the_view():
    """UX review problem 1: a huge seed raised inside the callback; the slider then went dead."""
    v = padding(batch_size=16)
    v.seed.value = HUGE_SEED
    assert "seed must be between" in v.message.value and "invalid input" in v.text()
    v.batch_size.value = 17          # still says why nothing is drawn
    assert "seed" in v.message.value
    v.seed.value = "3"
    assert v.stats.batch_size == 17 and v.message.value == ""


def test_distributed_view_controls():
    v = distributed(n=10, world_size=4)
    assert "padding copies 2" in v.text()
    assert v.output.value.count("outline:2px solid") == 2 == v.view.padding   # red cells = padding copies
    shards = v.view.shards
    v.next_epoch.click()
    assert v.epoch.value == 1 and v.view.shards != shards
    v.call_set_epoch.value = False
    assert v.view.shards == shards
    v.drop_last.value = True
    assert "dropped 2" in v.text() and "outline:2px solid" not in v.output.value
    v.shuffle.value = False
    v.world_size.value = 1
    v.n.value = 1
    assert "rank 0: [0]" in v.text()
    v.epoch.value = v.epoch.max
    assert v.next_epoch.disabled and "last one" in v.message.value


def test_red_cells_are_exactly_the_padding_copies():
    for n, world in [(10, 4), (60, 8), (1, 8), (13, 4), (59, 7)]:
        v = distributed(n=n, world_size=world)
        cells = padding_positions(v.view)
        assert len(cells) == v.view.padding
        everything = [i for shard in v.view.shards for i in shard]
        assert all(everything.count(v.view.shards[r][k]) >= 2 for r, k in cells)
