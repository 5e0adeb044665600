"""The atlas's entries for the launch and the rendezvous (chapter 7): the arguments a launcher passes each process,
and the TCP store every rank meets at before its process group exists (its port already held by another process;
fewer ranks arriving than world_size says). The store's fragments run in this one process on the CPU: a store's
wait is counted in whole seconds, so the second one's run waits about 1 s per case (the seconds it reports
are shown as <seconds>: under load they could read 2). Its timeout is 1 s, not less: rank 0's own connection to
its store counts against the same timeout, and under load a shorter one could end that connection first (another
error than the one shown).
"""
from __future__ import annotations

from course_utils.atlas.entry import Entry, source

ENTRIES = (
    Entry(
        id="launch-local-rank-argument", stage="distributed", chapter=7,
        title="a script whose argparse does not accept the --local-rank argument torch.distributed.launch passes "
              "each process (or written for the launcher, then started by torchrun, which passes none)",
        code=source("""
            # train.py, started by: python -m torch.distributed.launch --nproc-per-node=1 train.py
            import argparse
            parser = argparse.ArgumentParser()
            parser.add_argument("--local_rank", type=int, default=0)   # the launcher passes --local-rank=0
            args = parser.parse_args()
        """),
        fix=source("""
            # train.py, started by: torchrun --nproc-per-node=1 train.py
            import argparse, os
            parser = argparse.ArgumentParser()
            args = parser.parse_args()
            local_rank = int(os.environ["LOCAL_RANK"])   # torchrun (and the launcher) set it for each process
        """),
        cause="torch.distributed.launch adds an argument to every process's command line: --local-rank=N since "
              "torch 2.0, --local_rank=N before; a script whose parser lacks that exact spelling exits with "
              "argparse's error (exit code 2) and the launcher reports the failed rank. torchrun passes no argument "
              "at all. Read the rank from os.environ['LOCAL_RANK'] (both launchers set it) and start with torchrun; "
              "or accept both spellings: parser.add_argument('--local-rank', '--local_rank', type=int).",
        expect="SystemExit",
        not_run="the launcher starts the script as processes of its own (about 2 s here), and these are argparse's "
                "words; tests/test_atlas.py launches such a script with torch.distributed.launch and checks them",
        message="usage: train.py [-h] [--local_rank LOCAL_RANK]\n"
                "train.py: error: unrecognized arguments: --local-rank=0",
        sources=("https://github.com/XPixelGroup/BasicSR/issues/626",
                 "https://github.com/microsoft/LoRA/issues/79",
                 "https://github.com/babylm/baseline-pretraining/issues/2",
                 "https://github.com/lmy98129/VLPD/issues/6",
                 "https://github.com/FudanNLP/CPT/issues/65"),
        wordings=("train_adgen.py: error: unrecognized arguments: --local_rank=2",),   # torch < 2.0's spelling (CPT#65)
    ),
    Entry(
        id="dist-port-in-use", stage="distributed", chapter=7,
        title="started the rendezvous store on a port another process already holds (MASTER_PORT of a run still going)",
        code=(
            "import datetime, socket\n"
            "import torch.distributed as dist\n"
            "$holder\n"
            "try:\n"
            "    store = dist.TCPStore(\"127.0.0.1\", port, world_size=1, is_master=True, wait_for_workers=False,\n"
            "                          timeout=datetime.timedelta(seconds=2))\n"
            "finally:\n"
            "    $release\n"
        ),
        fix=(
            "import datetime, socket\n"
            "import torch.distributed as dist\n"
            "$holder\n"
            "try:\n"
            "    store = dist.TCPStore(\"127.0.0.1\", 0, world_size=1, is_master=True, wait_for_workers=False,\n"
            "                          timeout=datetime.timedelta(seconds=2))   # 0: the system picks a free port\n"
            "    shown = store.port != port\n"
            "finally:\n"
            "    $release\n"
        ),
        cause="The master's store listens on MASTER_PORT, and a port is held by one listener at a time: an "
              "earlier run that is still alive (or a second job started with the same port) has it. Stop that "
              "process or pick another port (torchrun --master_port, or --rdzv-endpoint=localhost:0 on one machine).",
        expect="DistNetworkError",
        params=(
            {"holder": "held = socket.socket()\n"
                       "held.bind((\"127.0.0.1\", 0))\n"
                       "held.listen()\n"
                       "port = held.getsockname()[1]",
             "release": "held.close()"},
            {"holder": "first = dist.TCPStore(\"127.0.0.1\", 0, world_size=1, is_master=True, wait_for_workers=False)\n"
                       "port = first.port   # the store of a run that is still going",
             "release": "del first"},
        ),
        sources=(
            "https://github.com/xdit-project/mochi-xdit/issues/22",
            "https://github.com/om-ai-lab/VLM-R1/issues/289",
            "https://github.com/NVIDIA/Megatron-LM/issues/1371",
            "https://github.com/intelligent-machine-learning/dlrover/issues/443",
            "https://github.com/thu-coai/CDial-GPT/issues/103",
        ),
        wordings=(   # older torch's TCPStore (dlrover#443; torch 1.x, CDial-GPT#103)
            "The server socket has failed to listen on any local network address. The server socket has failed to "
            "bind to [::]:44796 (errno: 98 - Address already in use). The server socket has failed to bind to "
            "0.0.0.0:44796 (errno: 98 - Address already in use).",
            "Address already in use",
        ),
    ),
    Entry(
        id="dist-store-clients-missing", stage="distributed", chapter=7,
        title="world_size says more ranks than reach init_process_group (a rank crashed first, a node never "
              "started, or the other nodes cannot reach MASTER_ADDR)",
        code=source("""
            import datetime, socket
            import torch.distributed as dist
            probe = socket.socket()
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
            probe.close()
            world = $world   # rank 0 of $world; the others never arrive (torchrun's default waits 30 minutes to say so)
            dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=world,
                                    timeout=datetime.timedelta(seconds=1))
        """),
        fix=source("""
            import datetime, socket
            import torch.distributed as dist
            probe = socket.socket()
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
            probe.close()
            world = 1   # the processes that really start (torchrun: --nnodes x --nproc-per-node); here one
            try:
                dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=world,
                                        timeout=datetime.timedelta(seconds=30))
                shown = dist.get_world_size()
            finally:
                if dist.is_initialized():
                    dist.destroy_process_group()
        """),
        cause="Rank 0 holds the rendezvous store and waits, up to the group's timeout, until world_size ranks have "
              "joined it; the message counts who came. The missing ranks are the cause: one crashed before "
              "init_process_group (read its own error, above this one in the log), a node's torchrun was never "
              "started or got another --nnodes, or the other nodes cannot reach MASTER_ADDR:MASTER_PORT (an "
              "address only rank 0's machine resolves, a firewall). A larger timeout helps only when the ranks are "
              "merely slow to start.",
        expect="DistStoreError",
        params=({"world": 2}, {"world": 4}),
        sources=(
            "https://github.com/OpenRLHF/OpenRLHF/issues/1040",
            "https://github.com/MLI-lab/DeepDeWedge/issues/20",
            "https://github.com/Liuziyu77/Visual-RFT/issues/123",
            "https://github.com/lewandofskee/MobileMamba/issues/15",
        ),
    ),
)
