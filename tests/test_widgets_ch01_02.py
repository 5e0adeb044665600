"""Chapter 1-2 views, headless: set every control, click every button, check what the view shows."""
from course_utils.pipeline import trace_pipeline
from course_utils.widgets.pipeline_view import pipeline_view
from course_utils.widgets.sampling_view import distributed, padding, sampling_strategies


def test_pipeline_view_controls():
    v = pipeline_view(n=100, batch_size=16, shuffle=True, drop_last=False)
    assert "7 batches" in v.text() and v.image.value
    v.drop_last.value = True
    assert "6 batches" in v.text()
    first = trace_pipeline(100, 16, True, True, epochs=2).epochs
    assert f"skipped this epoch: {sorted(first[0].skipped)}" in v.text()
    v.next_epoch.click()
    assert "epoch 2" in v.text() and f"skipped this epoch: {sorted(first[1].skipped)}" in v.text()
    v.batch_size.value = 25
    assert "epoch 1" in v.text() and "4 batches" in v.text()
    v.shuffle.value = False
    assert "batch 1: [0, 1, 2" in v.text()
    v.seed.value = 5
    v.n.value = 10_000
    assert "invalid input" in v.text() and v.message.value
    v.n.value = 0
    assert "invalid input" in v.text()
    v.n.value = 30
    assert "1 batches, sizes [25]" in v.text() and not v.message.value
    v.drop_last.value = False
    assert "2 batches, sizes [25, 5]" in v.text()
    assert "text/plain" in v._repr_mimebundle_()


def test_sampling_view_controls():
    v = sampling_strategies(batch_size=32, n_batches=30)
    assert "weighted" in v.text() and v.image.value
    v.batch_size.value = 64
    v.n_batches.value = 31          # more than one epoch holds: clipped, with a note
    assert v.message.value and len(v.results[0].counts) == 16
    v.replacement.value = False
    assert "replacement=False" in v.text()
    before = v.text()
    v.resample.click()
    assert v.seed.value == 1 and v.text() != before
    v.batch_size.value = 1
    assert len(v.results[2].counts) == 31


def test_padding_view_controls():
    v = padding(batch_size=16)
    plain = v.stats.waste
    v.bucketing.value = True
    assert v.stats.waste < plain and "bucketed" in v.text()
    v.batch_size.value = 1
    assert v.stats.waste == 0
    v.max_len.value = 3
    v.seed.value = 2
    assert "3..3" in v.text() and v.image.value


def test_distributed_view_controls():
    v = distributed(n=10, world_size=4)
    assert "padding copies 2" in v.text()
    shards = v.view.shards
    v.next_epoch.click()
    assert v.epoch.value == 1 and v.view.shards != shards
    v.call_set_epoch.value = False
    assert v.view.shards == shards
    v.drop_last.value = True
    assert "dropped 2" in v.text()
    v.shuffle.value = False
    v.world_size.value = 1
    v.n.value = 1
    assert "rank 0: [0]" in v.text()
    v.epoch.value = v.epoch.max
    v.next_epoch.click()                # already at the last epoch: stays there
    assert v.epoch.value == v.epoch.max
