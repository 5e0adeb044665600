"""Chapter 2's padding and packing facts, and the GRU's final state packed against padded."""
import pytest

from course_utils.chapters.ch02_packing import LENGTHS, padding_facts, rnn_last_state


def test_padding_facts():
    f = padding_facts()
    assert f["pad_sequence batch_first=True"] == (3, max(LENGTHS))
    assert f["first row, padding_side='left'"] == [0, 0, 0, 1, 2]
    assert f["unsorted lengths, enforce_sorted=True"] == "RuntimeError"
    assert f["packed: steps per time"] == [3, 3, 2, 1, 1]
    assert f["pad_packed_sequence total_length=7"] == (3, 7, 4)
    assert f["lengths given back"] == list(LENGTHS)
    for k in ("invert_permutation(sorted) == unsorted_indices", "pack_sequence == pack_padded_sequence",
              "padding_value=-1 fills the rest", "unpad_sequence round trip", "unpack_sequence round trip"):
        assert f[k] is True, k


def test_packed_gru_stops_at_each_sequence_end_and_padded_does_not():
    r = rnn_last_state(0)
    assert r["packed h_n == last real step, all 3"] is True
    assert r["padded h_n == last real step"] == 1          # only the longest sequence
    assert r["shorter sequences off by > 0.01"] == r["shorter sequences"] == 2


def test_label_padding_counts_only_the_tokens_meant_to_count():
    """The oracle: each sequence's own unpadded cross-entropy, averaged over the tokens that should count."""
    from course_utils.chapters.ch02_packing import label_padding_lines
    for lengths in ((2, 4, 6), (3, 3, 1, 5)):
        lines = label_padding_lines(lengths=lengths, seed=3)
        total, longest = sum(lengths), max(lengths) * len(lengths)
        assert lines[0] == (f"labels padded with -100: {total} of {longest} positions counted; the loss is the mean "
                            f"over the {total} real tokens: True")
        assert lines[1].endswith("False") and f"{longest} of {longest}" in lines[1]
        assert lines[2].endswith("True") and f": {total - len(lengths)} positions counted" in lines[2]


@pytest.mark.parametrize("sizes", [(0, 3, 0), (2, 0, 1, 0, 0), (1, 1)])
def test_a_segment_sum_sized_from_the_largest_index_drops_trailing_empty_groups(sizes):
    from course_utils.chapters.ch02_packing import segment_sum_lines
    lines = segment_sum_lines(sizes)
    last = max(i for i, n in enumerate(sizes) if n)              # the oracle: the last graph with nodes
    assert f"output sized batch.max() + 1: {last + 1} rows" in lines[1]
    assert f"sized by the number of graphs: {len(sizes)} rows, {[float(n) for n in sizes]}" in lines[1]
