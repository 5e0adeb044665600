"""Chapter 4's kept-logits cell: the bytes are the shapes' arithmetic, and reducing per batch keeps the metric."""
import pytest

from course_utils.chapters.ch04_kept_outputs import kept_outputs, scaled_bytes


@pytest.mark.parametrize("batches,batch,length,vocab", [(8, 16, 64, 2000), (3, 5, 7, 11)])
def test_bytes_follow_the_shapes_and_the_accuracy_is_the_same(batches, batch, length, vocab):
    kept = kept_outputs(batches, batch, length, vocab, seed=1)
    n = batches * batch * length
    assert kept["shape"] == (batches * batch, length, vocab)
    assert kept["bytes"] == {"logits": n * vocab * 4, "argmax ids": n * 8, "counts": 16}
    values = list(kept["accuracy"].values())
    assert 0 < values[0] < 1 and max(values) - min(values) < 1e-6


def test_scaled_bytes_arithmetic():
    big = scaled_bytes(1000, 512, 30522)
    assert big["float32 logits"] == pytest.approx(1000 * 512 * 30522 * 4 / 1e9)
    assert big["float16 logits"] == pytest.approx(big["float32 logits"] / 2)
    assert big["int64 ids"] == pytest.approx(1000 * 512 * 8 / 1e9)
