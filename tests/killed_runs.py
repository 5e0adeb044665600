"""Where the tests train a run they then SIGKILL: one process start method for all of them.

These tests want fork's speed (a child that starts in milliseconds, so kills land inside training), but torch
forbids fork once this process has used CUDA: a forked child can neither initialise CUDA again nor run autograd
after a CUDA backward (found on an H100: every kill test failed once a GPU test had run). A forkserver child is
forked from a server process that is a fresh interpreter: it imports torch, the trainer and these test modules
once (``PRELOAD``) and never touches CUDA, so its children start nearly as fast as fork's and work on every
machine, with a GPU or without. Targets and their arguments are pickled: module-level functions only.
"""
import multiprocessing

# What a fork would inherit warm: the trainer, the modules torch and the trainer import lazily (torch._dynamo, which
# the first optimizer imports, takes more than a second: longer than the runs these tests kill), and the test
# modules whose functions the children run.
PRELOAD = ["torch", "torch._dynamo", "course_utils.production", "torch.utils.tensorboard",
           "tensorboard.compat.proto.summary_pb2", "tqdm.auto", "tests.test_production_resume",
           "tests.test_production_tasks", "tests.test_production_parts"]
CONTEXT = multiprocessing.get_context("forkserver")
CONTEXT.set_forkserver_preload(PRELOAD)


def process(target, *args) -> multiprocessing.Process:
    """A not yet started child that runs target(*args) (a forkserver child: see the module's docstring)."""
    return CONTEXT.Process(target=target, args=args)


def ready() -> None:
    """Start the server now (about two seconds, once), so that a test timing a child's run times the run alone."""
    import multiprocessing.forkserver
    multiprocessing.forkserver.ensure_running()
