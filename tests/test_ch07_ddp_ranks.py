"""Chapter 7's DDP-flag and collective checks (issue 43): run on two real gloo ranks, and the record's guard."""
import json
import multiprocessing as mp
import os

import pytest

from course_utils.chapters import ch07_ddp_ranks
from course_utils.chapters.ch07_ddp_ranks import RECORD, rank_trap_lines, record_rank_traps
from course_utils.infra.gloo_groups import destroy_kept


def _rank(rank: int, port: int, out: str) -> None:
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    record_rank_traps(ch07_ddp_ranks.Path(out))
    destroy_kept()          # the group's object kept until exit: freed right after a backward, it can deadlock


def test_two_ranks_record_what_the_chapter_says(tmp_path):
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    context = mp.get_context("fork")     # torch already imported: seconds less than spawn
    ranks = [context.Process(target=_rank, args=(r, port, str(tmp_path))) for r in (0, 1)]
    for p in ranks:
        p.start()
    for p in ranks:
        p.join(120)
    assert [p.exitcode for p in ranks] == [0, 0]
    traps = json.loads((tmp_path / RECORD).read_text())["traps"]
    c, d = traps["collectives"], traps["DDP flags"]
    every = traps["every line on every rank"]         # each rank runs the whole script
    assert every["a file written in the loop, unguarded: ranks that wrote it"] == [0, 1]
    assert every["the same write under if dist.get_rank() == 0: ranks that wrote it"] == [0]
    assert every["DataLoader(num_workers=2) on each rank: worker processes each rank started"] == [2, 2]
    assert c["x = all_reduce(t): x, then t (rank r holds r + 1)"] == [None, 3.0]
    assert c["broadcast(src=1): every rank holds"] == [2.0, 2.0]
    assert c["rank 0 at barrier(timeout=50 ms), rank 1 never comes"].startswith("RuntimeError: Timed out")
    assert d["different seeds, init_sync=False: weights equal on both ranks"] is False
    assert d["different seeds, default init_sync=True: weights equal on both ranks (rank 0's)"] is True
    assert d["broadcast_buffers=False: BatchNorm running_mean equal after DDP(...)"] is False
    assert d["forward_sync_buffers=False: running_mean equal after DDP(...)"] is True
    assert d["unused head, default DDP: two steps"].startswith("RuntimeError: Expected to have finished reduction")
    assert d["unused head, find_unused_parameters=True"] == d["unused head, static_graph=True"] == "ran"
    assert d["bucket_cap_mb=0.0001: parameters per bucket, backward 1 and 2"] == [[6], [4, 2]]
    split = traps["one batch split over the ranks"]    # DDP's average is the whole batch's gradient (mean loss)
    assert split["loss reduction='mean', 4 examples per rank: gradient, one process on all 8 / DDP's"] == 1.0
    assert split["loss reduction='mean': weights after one SGD step (lr 0.1) = one process's on all 8"] is True
    assert split["loss reduction='sum', 4 examples per rank: gradient, one process on all 8 / DDP's"] == 2.0
    assert split["loss reduction='sum': weights after one SGD step (lr 0.1) = one process's on all 8"] is False
    uneven = traps["uneven batch counts"]             # the rank with a batch left waits; Join lets both finish
    result = uneven["rank 0: 3 batches, rank 1: 2; each rank's result"]
    assert result[0].startswith("RuntimeError: Timed out waiting 500ms") and result[1] == "finished its 2 batches"
    assert "pair.cc" not in result[0] and "unbound_buffer" not in result[0]          # the source position cut
    assert uneven["the same loop under Join([ddp]): steps per rank"] == [3, 2]
    assert uneven["under Join: weights equal on both ranks at the end"] is True
    bn = traps["SyncBatchNorm"]
    assert bn["convert_sync_batchnorm: layers"] == ["Linear", "SyncBatchNorm", "ReLU"]
    assert bn["BatchNorm in DDP, 2 of the 4 rows on each rank: outputs equal one process's on all 4"] is False
    assert bn["  its running_mean: this rank's own rows' on every rank"] is True
    assert bn["  rank 0's running_mean (what rank 0's checkpoint keeps): rank 0's rows'"] is True
    assert bn["the same rows, the sums all-reduced first (SyncBatchNorm's arithmetic, by hand): outputs equal one "
              "process's"] is True
    assert bn["  its running_mean and running_var: the whole batch's, on every rank"] is True
    assert bn["one row per rank, BatchNorm1d in train mode"].startswith("ValueError: Expected more than 1 value")
    p = traps["predictions from every rank"]          # 11 examples on 2 ranks: one padded duplicate, or one dropped
    assert p["drop_last=False: examples per rank"] == [6, 6] and p["drop_last=True: examples per rank"] == [5, 5]
    assert p["drop_last=False: rank 0's own predictions cover"] == "6 of 11"
    assert p["drop_last=False: gathered pairs, distinct examples"] == [12, 11]
    assert p["drop_last=False: keyed by index, every example once"] is True
    assert p["drop_last=True: gathered pairs, distinct examples"] == [10, 10]
    assert p["drop_last=True: keyed by index, every example once"] is False
    assert rank_trap_lines(tmp_path)[0] == "world size: 2"


def test_a_record_from_other_code_is_refused(tmp_path):
    (tmp_path / RECORD).write_text(json.dumps({"source": "0" * 16, "world_size": 2, "traps": {}}))
    with pytest.raises(RuntimeError, match="other code"):
        rank_trap_lines(tmp_path, recorded_by=record_rank_traps)
    assert os.path.exists(tmp_path / RECORD)
