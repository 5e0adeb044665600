"""Five error reports from real threads that were not used to build the atlas (none is among its sources), as the
learners pasted them (issue 39's "what explain returns for five real messages"): the thread, the text, and the
entry a reader of the thread would pick."""
from __future__ import annotations

REAL = [
    ("https://github.com/efeslab/Atom/issues/8", "tensors-on-two-devices",
     "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu! "
     "(when checking argument for argument mat2 in method wrapper_CUDA_mm)"),
    ("https://github.com/Duankaiwen/LSNet/issues/24", "collate-stack-unequal-sizes",
     "Traceback (most recent call last):\n"
     '  File "/media/zhaozhenxi/mmdetection_zuixin/tools/train.py", line 190, in <module>\n'
     "    main()\n"
     '  File "/root/anaconda3/envs/openmmlab/lib/python3.7/site-packages/torch/utils/data/dataloader.py", line 521, '
     "in __next__\n"
     "    data = self._next_data()\n"
     "RuntimeError: stack expects each tensor to be equal size, but got [2, 51] at entry 0 and [5, 51] at entry 1"),
    ("https://github.com/kenshohara/3D-ResNets-PyTorch/issues/257", "state-dict-wrapper-prefix",
     "    raise RuntimeError('Error(s) in loading state_dict for {}:\\n\\t{}'.format(\n"
     "RuntimeError: Error(s) in loading state_dict for ResNet:\n"
     '\tMissing key(s) in state_dict: "conv1.weight".....\n'
     "\n"
     'Unexpected key(s) in state_dict: "module.conv1.weight"....'),
    ("https://github.com/TRAILab/CaDDN/issues/103", "batchnorm-batch-of-one",
     "Traceback (most recent call last):\n"
     '  File "train.py", line 203, in <module>\n'
     "    main()\n"
     '  File "/home/ubuntu/anaconda3/envs/caddn/lib/python3.8/site-packages/torch/nn/modules/module.py", line 532, '
     "in __call__\n"
     "    result = self.forward(*input, **kwargs)\n"
     "ValueError: Expected more than 1 value per channel when training, got input size torch.Size([1, 256, 1, 1])"),
    ("https://github.com/3d-hand-shape/hand-graph-cnn/issues/55", "backward-through-freed-graph",
     "Traceback (most recent call last):\n"
     '  File "/mnt/hand/model/hand-graph-cnn-master/train_script.py", line 120, in main\n'
     "    loss.backward()\n"
     '  File "/root/miniconda3/envs/myconda/lib/python3.7/site-packages/torch/autograd/__init__.py", line 127, '
     "in backward\n"
     "    allow_unreachable=True)  # allow_unreachable flag\n"
     "RuntimeError: Trying to backward through the graph a second time, but the saved intermediate results have "
     "already been freed. Specify retain_graph=True when calling backward the first time."),
]
