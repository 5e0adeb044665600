"""Chapter 2's padding and packing facts, and the GRU's final state packed against padded."""
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
