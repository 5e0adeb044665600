"""A trainer killed while its DataLoader workers start leaves no worker behind (data_order.WorkerStart).

torch's workers notice their parent's death by their parent pid changing from what they read when their loop
starts; a parent that dies before that read leaves them waiting for batches forever (found after a kill test in
`make test`: a 600 MB orphan, alive 20 minutes later). Each case forks a child that starts two workers, slows
their start (a sleep, where torch reads the pid or where our worker_init_fn runs), and SIGKILLs itself at once;
its workers share its process group, which the test watches. The negative control, torch's own start with our
seeding only, shows the orphans; the training loader's start leaves none.
"""
from __future__ import annotations

import os
import signal
import sys
import time

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data._utils import worker as torch_worker

from course_utils.production import data_order
from tests import killed_runs

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process groups read from /proc")
SLOW_START_S = 0.5


_started = None   # in the child: the write end of a pipe each worker writes a byte to as its pause begins


def _pause() -> None:
    """A worker's slow start: tell the child it is here, then sleep (the child dies meanwhile)."""
    os.write(_started, b"w")
    time.sleep(SLOW_START_S)


def _start_workers_and_die(start: str, slow: str) -> None:
    """In a child of its own process group: two workers whose start pauses at `slow`; once both are in their
    pause, SIGKILL."""
    global _started
    os.setpgid(0, 0)
    arrived, _started = os.pipe()
    init = data_order.WorkerStart() if start == "training loader" else data_order.seed_worker
    if slow == "before worker_init_fn":
        init = _after_a_pause(init)
    else:                                                     # after worker_init_fn, where torch reads the pid
        original = torch_worker.ManagerWatchdog.__init__
        def pausing(self):
            _pause()
            original(self)
        torch_worker.ManagerWatchdog.__init__ = pausing
    loader = DataLoader(TensorDataset(torch.arange(8.0)), batch_size=2, num_workers=2, worker_init_fn=init,
                        multiprocessing_context="fork")
    batches = iter(loader)                  # the workers are forked now; the iterator is kept, as a training loop keeps
    paused = b""                            # it (one dropped here would shut its workers down before the kill)
    while len(paused) < 2:
        paused += os.read(arrived, 2 - len(paused))
    os.kill(os.getpid(), signal.SIGKILL)
    del batches


class _after_a_pause:
    def __init__(self, init):
        self.init = init

    def __call__(self, worker_id):
        _pause()
        self.init(worker_id)


def _living_members(group: int) -> list[int]:
    """Processes of a process group that are not zombies, from /proc."""
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = open(f"/proc/{entry}/stat").read()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()          # after the command name: state, ppid, pgrp, ...
            if int(fields[2]) == group and fields[0] != "Z":
                members.append(int(entry))
    return members


def _survivors(start: str, slow: str) -> list[int]:
    """The child's workers still alive 3 s after it was killed (then killed, so nothing outlives the test)."""
    child = killed_runs.process(_start_workers_and_die, start, slow)
    child.start()
    deadline = time.monotonic() + 60
    while child.exitcode is None and time.monotonic() < deadline:   # not join(): it waits for a pipe that orphaned
        time.sleep(0.01)                                              # workers inherited and keep open
    assert child.exitcode == -signal.SIGKILL
    time.sleep(SLOW_START_S + 2.5)                            # past the pause, with room for a busy machine
    left = _living_members(child.pid)
    if left:
        os.killpg(child.pid, signal.SIGKILL)
    return left


@pytest.mark.parametrize("slow", ["where torch reads the parent pid", "before worker_init_fn"])
def test_a_trainer_killed_as_its_workers_start_leaves_no_worker(slow):
    assert _survivors("training loader", slow) == []


def test_torchs_own_start_leaves_the_workers_behind():
    """The negative control: without WorkerStart, workers that read their parent's pid after its death stay."""
    assert len(_survivors("seeding only", "where torch reads the parent pid")) == 2
