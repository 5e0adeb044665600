"""default_collate's rules as chapter 2 prints them: each row against zip, torch.stack and the dataset itself."""
import torch
from torch.utils.data import DataLoader

from course_utils.chapters import ch02_collate_rules as cr


def row(kind: str) -> str:
    return next(line for line in cr.collate_lines() if line.startswith(f"{kind} "))


def test_a_list_example_is_collated_position_by_position_as_zip_transposes_it():
    examples = cr.KINDS["lists"]
    assert row("lists").endswith("-> " + cr._short(list(zip(*examples))))
    for batch_size in (1, 2):
        batch = next(iter(DataLoader(cr.Sentences(), batch_size=batch_size)))
        assert batch == list(zip(*cr.Sentences.rows[:batch_size]))


def test_numbers_and_arrays_are_stacked_and_strings_kept():
    assert row("tensors").endswith("-> " + cr._short(torch.stack(cr.KINDS["tensors"])))
    assert row("ints").endswith("-> tensor([1, 2])")
    assert row("strings").endswith("-> ['cat', 'dog']")
    assert "RuntimeError: each element in list of batch should be of equal size" in row("lists of two lengths")
    assert "TypeError: default_collate: batch must contain" in row("None")
    assert len(cr.collate_lines()) == len(cr.KINDS) + 1
    assert cr.collate_lines()[-1].endswith("after .float(): no error") and "RuntimeError" in cr.collate_lines()[-1]


def test_the_two_ways_to_keep_the_lists_return_the_datasets_own_examples():
    lines = cr.word_list_lines()
    assert lines[3].endswith(cr._short([list(r) for r in cr.Sentences.rows]))
    assert lines[4].endswith(cr._short(list(cr.Sentences.rows[0])))
    assert "RuntimeError: each element in list of batch should be of equal size" in lines[2]
