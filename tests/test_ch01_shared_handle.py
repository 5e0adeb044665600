"""Chapter 1: a file opened before fork is shared by the workers; one opened on the first read is not."""
from course_utils.chapters import ch01_shared_handle as sh


def test_a_forked_childs_seek_moves_the_parents_position():
    assert sh._shared_offset_after_fork() is True


def test_records_come_back_right_alone_and_per_worker_and_wrong_through_an_inherited_handle():
    assert sh.wrong_records(True, num_workers=0) == 0
    assert sh.wrong_records(False) == 0
    assert sh.wrong_records(True) > 0


def test_the_dataset_reads_record_i_as_i(tmp_path):
    path = tmp_path / "r.bin"
    path.write_bytes(b"".join(i.to_bytes(4, "little") for i in range(8)))
    for open_in_init in (True, False):
        dataset = sh.Records(path, open_in_init, pause=0.0)
        assert len(dataset) == 8 and [dataset[i] for i in (7, 0, 3)] == [7, 0, 3]


def test_the_lines_say_what_the_counts_are():
    lines = sh.shared_handle_lines()
    assert len(lines) == 4 and all(line.endswith(("True", "0 wrong", f"0 of {sh.RECORDS} wrong")) for line in lines)


def test_a_mapped_file_counts_in_every_workers_rss_but_once_in_their_pss():
    import sys

    import pytest

    from course_utils.chapters.ch01_shared_handle import mapped_file_lines, mapped_file_memory

    if not sys.platform.startswith("linux"):
        pytest.skip("smaps_rollup is Linux's")
    for workers in (1, 2):
        grown = mapped_file_memory(mib=16, workers=workers)
        assert len(grown) == workers
        for g in grown:
            assert abs(g["Rss"] - 16) <= 2 and abs(g["Pss"] - 16 / workers) <= 2 and g["Private_Dirty"] < 2
    assert all(line.count("True") >= 1 and "False" not in line for line in mapped_file_lines(mib=16)[1:])
