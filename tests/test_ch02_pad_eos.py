"""Padding with the end token: masking by id removes every end-token label; the attention mask keeps them."""
import torch

from course_utils.chapters import ch02_pad_eos as pe


def test_the_two_masks_differ_exactly_at_the_first_end_tokens():
    by_id, by_mask = pe.labels_for(pe.RULES[0]), pe.labels_for(pe.RULES[1])
    differ = by_id != by_mask
    assert int(differ.sum()) == len(pe.SEQUENCES)
    for row, sequence in enumerate(pe.SEQUENCES):
        assert differ[row].nonzero().flatten().tolist() == [len(sequence) - 2]     # the label of the end token
        assert by_mask[row, len(sequence) - 2] == pe.EOS
    assert (by_id == pe.EOS).sum() == 0


def test_generation_stops_only_when_the_end_token_was_a_target():
    for seed in range(2):
        assert all(g[-1] != pe.EOS and len(g) == pe.LIMIT + 1 for g in pe.train_and_generate(pe.RULES[0], seed))
        assert pe.train_and_generate(pe.RULES[1], seed) == [list(s) for s in pe.SEQUENCES]


def test_padded_inputs():
    ids, mask = pe.padded()
    assert ids.shape == (len(pe.SEQUENCES), pe.LENGTH) and torch.equal(mask.sum(1), torch.tensor([len(s) for s in pe.SEQUENCES]))
