"""The atlas's entries for DataLoader workers (chapter 1): an error raised in a worker, a worker that dies, a
timeout, too many workers, too many open files, CUDA in a forked worker (quoted: it needs a GPU). Fragments that
start workers use one worker and the fork start method (the Linux default), so classes defined in a fragment reach
the worker without pickling.
"""
from __future__ import annotations

from course_utils.atlas.entry import Entry, source


def _under_a_low_file_limit(*lines: str) -> str:
    """The too-many-open-files fragment around `lines` (the entry and its fix differ only there): a DataLoader's
    batches loaded with the open-file limit lowered meanwhile, as on a machine whose ulimit -n is low."""
    body = "".join(f"    {line}\n" for line in lines)
    return ("import resource\n"
            "\n"
            "soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
            "open_now = len(os.listdir(\"/dev/fd\"))\n"
            "resource.setrlimit(resource.RLIMIT_NOFILE, (open_now + $spare, hard))  # a machine whose ulimit -n is low\n"
            "try:\n"
            "    loader = DataLoader(TensorDataset(torch.arange(512.0)), batch_size=2, num_workers=1)\n"
            f"{body}"
            "finally:\n"
            "    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))\n")


def _records_module(opened_in: str) -> str:
    """Lines writing records.py, a dataset module whose file is opened in `opened_in` ("__init__", or the first read),
    and importing it: spawn pickles the dataset by its class's module, which a class defined in a notebook cell lacks."""
    at_init = opened_in == "__init__"
    return ("(tmp / \"records.py\").write_text(\n"
            "    \"import torch\\n\"\n"
            "    \"class Records(torch.utils.data.Dataset):\\n\"\n"
            "    \"    def __init__(self, path):\\n\"\n"
            "    \"        self.path = path\\n\"\n"
            + (f"    \"        self.file = open(path, $mode)   # opened once, in the main process\\n\"\n" if at_init else
               "    \"        self.file = None   # opened on the first read: in the worker\\n\"\n")
            + "    \"    def __len__(self):\\n\"\n"
            "    \"        return 4\\n\"\n"
            "    \"    def __getitem__(self, i):\\n\"\n"
            + ("" if at_init else "    \"        if self.file is None:\\n\"\n"
                                  "    \"            self.file = open(self.path, $mode)\\n\"\n")
            + "    \"        self.file.seek(i)\\n\"\n"
            "    \"        return torch.tensor(ord(self.file.read(1)))\\n\")\n"
            "(tmp / \"data.bin\").write_bytes(b\"wxyz\")\n"
            "sys.path.insert(0, str(tmp))   # the project's folder: its modules import\n"
            "from records import Records\n")


ENTRIES = (
    Entry(
        id="worker-raised", stage="data", chapter=1,
        fix_line='self.rows = [row for row in rows if parses(row)]   # drop (or repair) what __getitem__ cannot read',
        title="__getitem__ raises inside a DataLoader worker (a bad row in the data)",
        code=source("""
            class Rows(Dataset):
                rows = [$rows]

                def __len__(self):
                    return len(self.rows)

                def __getitem__(self, i):
                    x, y = self.rows[i].split(",")
                    return torch.tensor(float(x)), int(y)

            for xb, yb in DataLoader(Rows(), batch_size=2, num_workers=1):
                pass
        """),
        fix=source("""
            def parses(row):
                x, y = row.split(",")
                try:
                    float(x), int(y)
                except ValueError:
                    return False
                return True

            class Rows(Dataset):
                def __init__(self, rows):
                    self.rows = [row for row in rows if parses(row)]

                def __len__(self):
                    return len(self.rows)

                def __getitem__(self, i):
                    x, y = self.rows[i].split(",")
                    return torch.tensor(float(x)), int(y)

            shown = sum(len(yb) for xb, yb in DataLoader(Rows([$rows]), batch_size=2, num_workers=1))
        """),
        cause="An exception in __getitem__ (or a transform, or collate_fn) inside a worker is sent back and "
              "re-raised as the same type with 'Caught ... in DataLoader worker process N'; the real error "
              "is the last line of the 'Original Traceback' that follows. Fix that: here, a row that does "
              "not parse (clean or skip it when the dataset is built).",
        expect="ValueError",
        params=({"rows": '"0.5,1", "0.7,cat", "0.1,0"'}, {"rows": '"0.5,1", "n/a,0", "0.1,1", "0.3,0"'}),
        sources=("https://github.com/airctic/icevision/issues/365",
                 "https://github.com/qinglew/PCN-PyTorch/issues/9",
                 "https://github.com/Binyr/ASDA/issues/5"),
        python_note="The message embeds the worker's formatted traceback: the site-packages path and torch's line "
                    "numbers vary by install, and Python 3.12+ shows no <listcomp> frame (comprehensions are "
                    "inlined) and may draw other caret lines than 3.11; only the first line ('Caught ValueError in "
                    "DataLoader worker process 0.') and the last line (the original error) are stable.",
    ),
    Entry(
        id="worker-exited-unexpectedly", stage="data", chapter=1,
        title="a DataLoader worker process dies (killed by the OOM killer, or it crashed or exited)",
        code=source("""
            class Fragile(Dataset):
                def __len__(self):
                    return 4

                def __getitem__(self, i):
                    $death
                    return torch.zeros(2)

            for xb in DataLoader(Fragile(), batch_size=2, num_workers=1):
                pass
        """),
        fix=source("""
            class Fragile(Dataset):
                def __len__(self):
                    return 4

                def __getitem__(self, i):
                    return torch.zeros(2)

            shown = sum(1 for xb in DataLoader(Fragile(), batch_size=2, num_workers=1))
        """),
        cause="The worker process ended without a Python exception to send back: the kernel's out-of-memory "
              "killer, a crash in native code (a segfault, /dev/shm full) or an exit() in the dataset; the "
              "message cannot say which. Rerun with num_workers=0 to see the error in the main process, "
              "check the kernel log for the OOM killer, lower num_workers or the batch size.",
        expect="RuntimeError",
        params=({"death": "os._exit(1)"}, {"death": "os.kill(os.getpid(), signal.SIGKILL)"}),
        sources=("https://github.com/rowanz/r2c/issues/27",
                 "https://github.com/patrickloeber/pytorchTutorial/issues/3",
                 "https://github.com/xuebinqin/BASNet/issues/32",
                 "https://github.com/mittagessen/kraken/issues/266",
                 "https://github.com/nianticlabs/simplerecon/issues/3",
                 "https://github.com/hkchengrex/STCN/issues/132",
                 "https://github.com/MIC-DKFZ/nnUNet/issues/294",
                 "https://github.com/huaweicloud/dls-example/issues/26",
                 "https://github.com/ultralytics/ultralytics/issues/1238"),
        wordings=(
                  # a batch that does not fit in /dev/shm, as torch words it when sharing one (nnUNet#294,
                  # dls-example#26: a container's shared memory)
                  "RuntimeError: unable to write to file </torch_15769_1517813162>",
                  "RuntimeError: unable to write to file </torch_722_783672312_1>: No space left on device (28)",   # 2.x
                  "RuntimeError: unable to write to file </torch_76_3625483894> at /pytorch/aten/src/TH/THAllocator.c:383",
                  "DataLoader worker (pid 22048) is killed by signal: Killed.",   # the SIGCHLD handler's words
                  # ... and for SIGBUS, with torch's own guess at the cause (STCN#132)
                  "DataLoader worker (pid 46794) is killed by signal: Bus error. It is possible that dataloader's "
                  "workers are out of shared memory. Please try to raise your shared memory limit.",
                  # what the dying worker itself prints on SIGBUS, before the loader's error (simplerecon#3)
                  "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared "
                  "memory (shm)."),
    ),
    Entry(
        id="dataloader-timeout", stage="data", chapter=1,
        title="a batch takes longer to load than the DataLoader's timeout",
        code=source("""
            import time

            class Slow(Dataset):
                def __len__(self):
                    return 1

                def __getitem__(self, i):
                    time.sleep($load)  # e.g. a read from a slow network drive
                    return torch.zeros(2)

            loader = DataLoader(Slow(), batch_size=1, num_workers=1, timeout=$timeout)
            batch = next(iter(loader))
        """),
        fix=source("""
            import time

            class Slow(Dataset):
                def __len__(self):
                    return 1

                def __getitem__(self, i):
                    time.sleep($load)  # e.g. a read from a slow network drive
                    return torch.zeros(2)

            loader = DataLoader(Slow(), batch_size=1, num_workers=1, timeout=5)   # well above the slowest batch
            batch = next(iter(loader))
            shown = tuple(batch.shape)
        """),
        cause="With timeout > 0 the main process waits at most that many seconds for each batch from the "
              "workers, then gives up. Set it well above the slowest batch (or leave the default 0, wait "
              "forever), and if a worker is really stuck find out where (a deadlock, a hung read).",
        expect="RuntimeError",
        params=({"load": 0.1, "timeout": 0.02}, {"load": 0.15, "timeout": 0.05}),
        sources=("https://github.com/pytorch/pytorch/issues/33296",
                 "https://github.com/pytorch/pytorch/issues/43502",
                 "https://github.com/MPI-Dortmund/tomotwin-cryoet/pull/57"),
    ),
    Entry(
        id="too-many-workers", stage="data", chapter=1,
        title="num_workers set far above the number of CPUs the process may use",
        code=source("""
            ds = TensorDataset(torch.randn(64, 4))
            loader = DataLoader(ds, batch_size=8, num_workers=$workers)
        """),
        fix=source("""
            ds = TensorDataset(torch.randn(64, 4))
            workers = min($workers, len(os.sched_getaffinity(0)))
            loader = DataLoader(ds, batch_size=8, num_workers=workers)
        """),
        cause="Each worker is a process; more of them than the CPUs this process may run on (its affinity, "
              "which cgroups and containers restrict) only adds contention and memory, and can freeze the "
              "loader. Cap num_workers at the CPU count the warning suggests (the number depends on the machine).",
        expect="UserWarning",
        params=({"workers": 64}, {"workers": 256}),
        sources=("https://github.com/AILab-CVC/YOLO-World/issues/413",
                 "https://github.com/embeddings-benchmark/mteb/issues/1331",
                 "https://github.com/MIC-DKFZ/ParticleSeg3D/pull/2"),
    ),
    Entry(
        id="too-many-open-files", stage="data", chapter=1,
        title="the main process keeps every batch the workers sent, under a low open-file limit (ulimit -n)",
        code=_under_a_low_file_limit(
            "kept = [xb for (xb,) in loader]   # every batch kept: each holds a shared-memory file open"),
        fix=_under_a_low_file_limit(
            "kept = [xb.clone() for (xb,) in loader]   # a copy in ordinary memory: the shared file is closed",
            "shown = len(kept)"),
        cause="A worker hands each batch over in shared memory, one open file per tensor (the Linux default "
              "sharing strategy, file_descriptor), and the file stays open as long as the tensor lives. Keeping "
              "every batch (a cache, a list of all outputs), or batches of many small tensors, exhausts the "
              "process's open-file limit. Keep copies (.clone(), .tolist()) or only what you need, raise ulimit -n, "
              "or call torch.multiprocessing.set_sharing_strategy('file_system') first thing.",
        expect="RuntimeError",
        params=({"spare": 32}, {"spare": 80}),
        sources=("https://github.com/zju3dv/NeuralRecon/issues/91",
                 "https://github.com/facebookresearch/detectron2/issues/3953",
                 "https://github.com/pytorch/pytorch/issues/49849",
                 "https://github.com/GoekeLab/m6anet/issues/75"),
        # what Python's multiprocessing raises when the limit strips a file from a worker's message and torch's
        # check for the limit comes too late to say so (torch's own note in dataloader.py names it)
        wordings=("received 0 items of ancdata",),
    ),
    Entry(
        id="cuda-in-forked-worker", stage="data", chapter=1,
        fix_line="xb = xb.cuda(non_blocking=True)   # workers return CPU tensors, the main process moves them",
        title="CUDA used inside a DataLoader worker (or any forked process) after the main process started CUDA",
        code=source("""
            torch.cuda.init()   # CUDA started in the main process (any .cuda() or device="cuda" before the loop)

            class OnGpu(Dataset):
                def __len__(self):
                    return 4

                def __getitem__(self, i):
                    return torch.zeros(2, device="cuda")   # a forked worker cannot use the parent's CUDA

            for xb in DataLoader(OnGpu(), batch_size=2, num_workers=2):
                pass
        """),
        fix=source("""
            class OnCpu(Dataset):
                def __len__(self):
                    return 4

                def __getitem__(self, i):
                    return torch.zeros(2)   # workers prepare CPU tensors

            for xb in DataLoader(OnCpu(), batch_size=2, num_workers=2, pin_memory=True):
                xb = xb.cuda(non_blocking=True)   # the main process moves each batch to the GPU
            shown = xb.device.type
        """),
        cause="A forked process inherits a copy of the parent's memory but not a usable CUDA context, so torch "
              "refuses to start CUDA in it; in a DataLoader worker the error arrives wrapped in 'Caught "
              "RuntimeError in DataLoader worker process N'. Keep workers on the CPU and move batches in the main "
              "process (pin_memory=True, .cuda(non_blocking=True)), or start workers with "
              "multiprocessing_context='spawn' if they truly need the GPU.",
        expect="RuntimeError",
        not_run="needs a CUDA GPU, which this machine lacks",
        message="Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, you must use "
                "the 'spawn' start method",
        sources=("https://github.com/shubham-goel/4D-Humans/issues/59",
                 "https://github.com/traveller59/spconv/issues/408",
                 "https://github.com/facebookresearch/pycls/issues/183",
                 "https://github.com/pytorch/pytorch/issues/40403"),
    ),
    Entry(
        id="spawn-dataset-open-handle", stage="data", chapter=1,
        title="a Dataset that opens its file (LMDB, HDF5, a file handle) in __init__, loaded by workers started by "
              "spawn (Windows, macOS; forkserver on Linux with Python 3.14)",
        code="import sys\n" + _records_module("__init__") + source("""
            dataset = Records(tmp / "data.bin")
            loader = DataLoader(dataset, batch_size=2, num_workers=1, multiprocessing_context="spawn")
            batches = [xb for xb in loader]   # spawn pickles the dataset for each worker, its open file too
        """),
        fix="import pickle, sys\n" + _records_module("the first read") + source("""
            dataset = Records(tmp / "data.bin")
            copy = pickle.loads(pickle.dumps(dataset))   # what spawn does to send the dataset to a worker
            shown = [copy[i].item() for i in range(len(copy))]   # the copy opens its own file on its first read
        """),
        fix_line="self.file = None   # in __init__; __getitem__ opens it on the first read: each worker its own",
        cause="A worker started by spawn (or forkserver) is a new interpreter: the DataLoader pickles the dataset to "
              "send it there, and an open file, an LMDB Environment, an h5py File, a database connection or a lock "
              "cannot be pickled. With fork (Linux's default up to Python 3.13) the worker inherits the object "
              "instead, which is why the same code runs on Linux. Keep the path in __init__ and open the handle on "
              "the first read, so each worker opens its own; num_workers=0 also runs, without the workers' speed. "
              "The fix here runs the step that failed, pickling the dataset, in this process; chapter 1 starts "
              "spawned workers (seconds each).",
        expect="TypeError",
        params=({"mode": "'rb'"}, {"mode": "'rb', buffering=0"}),
        sources=(
            "https://github.com/lct1997/BasicSTISR/issues/1",
            "https://github.com/pytorch/vision/issues/689",
            "https://github.com/Lyken17/Efficient-PyTorch/issues/13",
            "https://github.com/sgrvinod/a-PyTorch-Tutorial-to-Image-Captioning/issues/119",
            "https://github.com/qiuqiao/SOFA/issues/18",
        ),
        wordings=("cannot pickle 'Environment' object",     # LMDB's handle (BasicSTISR#1, torch 2.3.1, Windows)
                  "can't pickle Environment objects",        # Python 3.7's words (pytorch/vision#689)
                  "h5py objects cannot be pickled"),         # h5py's own words for its File (SOFA#18)
        python_note="Python's own words: 3.11 says \"cannot pickle '_io.BufferedReader' object\" (run here); "
                    "CPython's newer _io says \"cannot pickle 'BufferedReader' instances\" (read in its source, not "
                    "run here), shown in 3.11's words. torch also warns, before the error, that a pickle error "
                    "stopped a worker from starting.",
    ),
    Entry(
        id="spawn-without-main-guard", stage="data", chapter=1,
        title="a script whose top level starts DataLoader workers, run where workers start by spawn",
        code="# train.py, run as `python train.py` on Windows or macOS (or Linux with Python 3.14's forkserver)\n"
             "loader = DataLoader(TensorDataset(torch.randn(64, 4)), batch_size=8, num_workers=2)\n"
             "for (xb,) in loader:   # each spawned worker re-runs this file's top level, and starts workers again\n"
             "    pass\n",
        fix="def main():\n"
            "    loader = DataLoader(TensorDataset(torch.randn(64, 4)), batch_size=8, num_workers=2)\n"
            "    for (xb,) in loader:\n"
            "        pass\n"
            "if __name__ == \"__main__\":   # a worker imports the file as __mp_main__ and skips this\n"
            "    main()\n",
        cause="A spawned worker is a fresh interpreter that first imports your script to find its functions; "
              "whatever the top level does runs again in the worker, and starting workers from there, before the "
              "worker has finished starting, is refused. Put the work in main() under "
              "if __name__ == \"__main__\": (chapter 1 runs both versions of such a script).",
        expect="RuntimeError",
        not_run="needs a script started as its own process (chapter 1's main-guard cell runs one; a fragment here "
                "runs inside the notebook's kernel), and these are Python's words",
        message="An attempt has been made to start a new process before the\n"
                "current process has finished its bootstrapping phase.\n\n"
                "This probably means that you are not using fork to start your\n"
                "child processes and you have forgotten to use the proper idiom\n"
                "in the main module:\n\n"
                "    if __name__ == '__main__':\n"
                "        freeze_support()\n"
                "        ...",
        sources=("https://github.com/tinkerhub/ComputerVision-with-PyTorch-Learning-Program/issues/80",
                 "https://github.com/pytorch/tutorials/issues/1661",
                 "https://github.com/Project-MONAI/MONAI/issues/755",
                 "https://github.com/guoyang9/BPR-pytorch/issues/1"),
    ),
)
