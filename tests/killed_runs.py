"""Where the tests train a run they then SIGKILL: one process start method for all of them.

These tests want fork's speed (a child that starts in milliseconds, so kills land inside training), and fork is
what they use, except once this process has used CUDA: then a forked child can neither initialise CUDA again nor
run autograd after a CUDA backward (found on an H100: every kill test failed once a GPU test had run). From then
on a child comes from a forkserver: a fresh interpreter that imports torch, the trainer and these test modules
once (``PRELOAD``) and never touches CUDA, so its children start nearly as fast. Not on every machine: its server
and a child of it outlived pytest here (about 230 MB each, a run's worth left behind after every session), so the
machines without a GPU, CI's, keep fork. Targets and their arguments are pickled for a forkserver child:
module-level functions only.
"""
import multiprocessing

import torch

# What a fork would inherit warm: the trainer, the modules torch and the trainer import lazily (torch._dynamo, which
# the first optimizer imports, takes more than a second: longer than the runs these tests kill), and the test
# modules whose functions the children run.
PRELOAD = ["torch", "torch._dynamo", "course_utils.production", "torch.utils.tensorboard",
           "tensorboard.compat.proto.summary_pb2", "tqdm.auto", "tests.test_production_resume",
           "tests.test_production_tasks", "tests.test_production_parts"]


def context():
    """fork, or a forkserver once this process has initialised CUDA (see the module's docstring)."""
    if not torch.cuda.is_initialized():
        return multiprocessing.get_context("fork")
    server = multiprocessing.get_context("forkserver")
    server.set_forkserver_preload(PRELOAD)
    return server


def process(target, *args) -> multiprocessing.Process:
    """A not yet started child that runs target(*args)."""
    return context().Process(target=target, args=args)


def ready() -> None:
    """Start the forkserver now if children will come from one (about two seconds, once), so that a test timing a
    child's run times the run alone."""
    if torch.cuda.is_initialized():
        import multiprocessing.forkserver
        context()
        multiprocessing.forkserver.ensure_running()


def kill_lands(kill, folder, window: float, rng, tries: int = 6) -> tuple[bool, float]:
    """kill(delay) SIGKILLs a run in `folder` after `delay` s (uniform in [0.02 s, window]) and says whether it
    landed before the run ended. A miss means the machine got faster than when `window` was measured (the load
    dropped): the finished run is removed and the next try aims at half the window. Whether kills land then
    does not depend on the load; returns (landed, the window to use from now on)."""
    import shutil
    for _ in range(tries):
        if kill(rng.uniform(0.02, window)):
            return True, window
        shutil.rmtree(folder, ignore_errors=True)
        window /= 2
    return False, window
