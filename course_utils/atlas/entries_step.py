"""The atlas's entries for the step: forward, loss, backward, optimizer (chapter 3 and chapter 5's bugs),
schedulers (chapter 7), and mixed precision (stage "precision", chapter 7)."""
from __future__ import annotations

from course_utils.atlas.entry import Entry

ENTRIES = (
    Entry(
        id="mat1-mat2-shapes", stage="step", chapter=3,
        title="a Linear layer's in_features do not match the input's last dimension",
        code="nn.Linear($wanted, 5)(torch.randn(4, $given))",
        fix="shown = tuple(nn.Linear($given, 5)(torch.randn(4, $given)).shape)",
        cause="The input's last dimension must equal the layer's in_features; usually a flatten "
              "size computed for another image size, or a layer sized before a change upstream.",
        expect="RuntimeError",
        params=({"wanted": 20, "given": 10}, {"wanted": 784, "given": 3136}),
        sources=("https://discuss.pytorch.org/t/runtimeerror-mat1-and-mat2-shapes-cannot-be-multiplied/125563",),
    ),
    Entry(
        id="tensors-on-two-devices", stage="step", chapter=5,
        title="the model was moved to the GPU but the batch (or the labels) stayed on the CPU",
        code="from torch._subclasses.fake_tensor import FakeTensorMode\n"
             "# No GPU here: fake tensors give a second device ('meta') without memory; on a GPU it is cuda:0.\n"
             "# Fake mode raises a subclass of RuntimeError; a GPU raises RuntimeError itself, so re-raise as that.\n"
             "try:\n"
             "    with FakeTensorMode():\n"
             "        model = nn.Linear($n_in, $classes, device=\"meta\")   # model.to(device) was called\n"
             "        x = torch.randn($batch, $n_in)$x_to                   # the batch\n"
             "        y = torch.randint(0, $classes, ($batch,))             # the labels, never moved\n"
             "        loss = F.cross_entropy(model(x), y)\n"
             "except RuntimeError as err:\n"
             "    raise RuntimeError(str(err)) from None",
        fix="from torch._subclasses.fake_tensor import FakeTensorMode\n"
            "with FakeTensorMode():\n"
            "    model = nn.Linear($n_in, $classes, device=\"meta\")\n"
            "    x = torch.randn($batch, $n_in).to(\"meta\")       # x, y = x.to(device), y.to(device)\n"
            "    y = torch.randint(0, $classes, ($batch,)).to(\"meta\")\n"
            "    loss = F.cross_entropy(model(x), y)\n"
            "    shown = str(loss.device)",
        fix_line="x, y = x.to(device), y.to(device)   # the batch and its labels where the model is",
        cause="One operation got tensors on two devices: parameters moved with model.to(device) and a batch or its "
              "labels never moved (or a tensor created inside forward() on the CPU). On a GPU the devices read "
              "cuda:0 and cpu, and inside a layer torch words it 'Expected all tensors to be on the same device, "
              "but got mat1 is on cpu, different from other tensors on cuda:0 (when checking argument in method "
              "wrapper_CUDA_addmm)'.",
        expect="RuntimeError",
        params=({"n_in": 10, "classes": 3, "batch": 4, "x_to": ""},
                {"n_in": 32, "classes": 5, "batch": 8, "x_to": ".to(\"meta\")"}),
        sources=("https://github.com/BenMSK/trajectory_prediction_TraPHic/issues/1",
                 "https://github.com/kijai/ComfyUI-FluxTrainer/issues/116",
                 "https://github.com/wmyw96/FAST-NN/issues/1"),
    ),
    Entry(
        id="backward-through-freed-graph", stage="step", chapter=3,
        title="a recurrent hidden state carried from one batch to the next without .detach()",
        code="torch.manual_seed(0)\n"
             "rnn, head = nn.$cell(3, $hidden, batch_first=True), nn.Linear($hidden, 1)\n"
             "opt = torch.optim.SGD([*rnn.parameters(), *head.parameters()], lr=0.01)\n"
             "h = torch.zeros(1, 4, $hidden)\n"
             "for step in range(2):\n"
             "    x, y = torch.randn(4, 5, 3), torch.randn(4, 1)\n"
             "    out, h = rnn(x, h)                 # h still points into the previous batch's graph\n"
             "    loss = F.mse_loss(head(out[:, -1]), y)\n"
             "    opt.zero_grad()\n"
             "    loss.backward()\n"
             "    opt.step()",
        fix="torch.manual_seed(0)\n"
            "rnn, head = nn.$cell(3, $hidden, batch_first=True), nn.Linear($hidden, 1)\n"
            "opt = torch.optim.SGD([*rnn.parameters(), *head.parameters()], lr=0.01)\n"
            "h = torch.zeros(1, 4, $hidden)\n"
            "for step in range(2):\n"
            "    x, y = torch.randn(4, 5, 3), torch.randn(4, 1)\n"
            "    out, h = rnn(x, h.detach())        # keep the values, drop the old graph\n"
            "    loss = F.mse_loss(head(out[:, -1]), y)\n"
            "    opt.zero_grad()\n"
            "    loss.backward()\n"
            "    opt.step()\n"
            "shown = tuple(h.shape)",
        cause="backward() frees the graph it walked; a tensor kept from the previous step (an RNN hidden state, "
              "a running sum of losses) links the new loss to that freed graph. Detach what you carry over; "
              "retain_graph=True only trades this for an in-place error once optimizer.step() has changed "
              "the weights the old graph saved.",
        expect="RuntimeError",
        params=({"cell": "RNN", "hidden": 8}, {"cell": "GRU", "hidden": 16}),
        sources=("https://github.com/MorvanZhou/PyTorch-Tutorial/issues/57",
                 "https://github.com/quark0/darts/issues/56",
                 "https://github.com/karpathy/nn-zero-to-hero/issues/31"),
    ),
    Entry(
        id="saved-tensor-modified-inplace", stage="step", chapter=3,
        title="an in-place activation overwrote a tensor that backward needs",
        code="torch.manual_seed(0)\n"
             "model = nn.Sequential(nn.Linear($n_in, $width), $act, nn.ReLU(inplace=True))\n"
             "loss = model(torch.randn(4, $n_in)).sum()\n"
             "loss.backward()",
        fix="torch.manual_seed(0)\n"
            "model = nn.Sequential(nn.Linear($n_in, $width), $act, nn.ReLU())   # not in place\n"
            "loss = model(torch.randn(4, $n_in)).sum()\n"
            "loss.backward()\n"
            "shown = tuple(model[0].weight.grad.shape)",
        cause="Autograd saved a tensor for the backward pass (here the activation's output) and an in-place "
              "operation (inplace=True, +=, x[i] = ...) changed it before backward; its version counter no longer "
              "matches. Use the out-of-place form or clone before modifying.",
        expect="RuntimeError",
        params=({"n_in": 3, "width": 4, "act": "nn.Sigmoid()"},
                {"n_in": 6, "width": 8, "act": "nn.Tanh()"}),
        sources=("https://github.com/osmr/imgclsmob/issues/13",
                 "https://github.com/BierOne/bottom-up-attention-vqa/issues/6",
                 "https://discuss.pytorch.org/t/when-inplace-operation-are-allowed-and-when-not/169583/3"),
    ),
    Entry(
        id="backward-on-non-scalar", stage="step", chapter=3,
        title="backward() on a per-sample loss (reduction='none')",
        code="torch.manual_seed(0)\n"
             "model = nn.Linear(4, $n_out)\n"
             "loss_fn = nn.$loss(reduction=\"none\")\n"
             "loss = loss_fn(model(torch.randn($batch, 4)), $target)\n"
             "loss.backward()",
        fix="torch.manual_seed(0)\n"
            "model = nn.Linear(4, $n_out)\n"
            "loss_fn = nn.$loss(reduction=\"none\")\n"
            "loss = loss_fn(model(torch.randn($batch, 4)), $target)\n"
            "loss.mean().backward()                # reduce (or weight, then reduce) first\n"
            "shown = tuple(loss.shape)",
        cause="backward() without an argument needs a single number; a loss with reduction='none' (or a model "
              "output, or losses gathered from several GPUs by DataParallel) has one value per sample. Reduce it "
              "with .mean() or .sum() before calling backward().",
        expect="RuntimeError",
        params=({"loss": "MSELoss", "n_out": 1, "batch": 8, "target": "torch.randn(8, 1)"},
                {"loss": "CrossEntropyLoss", "n_out": 5, "batch": 16, "target": "torch.randint(0, 5, (16,))"}),
        sources=("https://github.com/xxlong0/SparseNeuS/issues/42",
                 "https://github.com/hy-struggle/PRGC/issues/16"),
    ),
    Entry(
        id="cross-entropy-target-dtype", stage="step", chapter=3,
        title="class labels passed to cross_entropy as floats (or int32)",
        code="torch.manual_seed(0)\n"
             "logits = nn.Linear(8, 3)(torch.randn(4, 8))\n"
             "labels = torch.tensor([0, 2, 1, 2], dtype=torch.$dtype)   # labels read from a CSV or a numpy array\n"
             "loss = F.cross_entropy(logits, labels)",
        fix="torch.manual_seed(0)\n"
            "logits = nn.Linear(8, 3)(torch.randn(4, 8))\n"
            "labels = torch.tensor([0, 2, 1, 2], dtype=torch.$dtype).long()   # class indices are int64\n"
            "loss = F.cross_entropy(logits, labels)\n"
            "shown = str(labels.dtype)",
        cause="With class indices as targets, cross_entropy wants int64 (long); labels from a float column, a "
              "float numpy array or np.int32 arrive as another dtype. Older torch words it 'expected scalar type "
              "Long but found Float'.",
        expect="RuntimeError",
        params=({"dtype": "float32"}, {"dtype": "int32"}),
        sources=("https://github.com/milesial/Pytorch-UNet/issues/93",
                 "https://github.com/pytorch/pytorch/issues/103813",
                 "https://github.com/jfzhang95/pytorch-video-recognition/issues/71"),
    ),
    Entry(
        id="cross-entropy-target-2d", stage="step", chapter=3,
        title="class labels of shape (N, 1) passed to cross_entropy",
        code="torch.manual_seed(0)\n"
             "logits = nn.Linear(8, $classes)(torch.randn($batch, 8))\n"
             "labels = torch.randint(0, $classes, ($batch, 1))   # one label per row, kept as a column\n"
             "loss = F.cross_entropy(logits, labels)",
        fix="torch.manual_seed(0)\n"
            "logits = nn.Linear(8, $classes)(torch.randn($batch, 8))\n"
            "labels = torch.randint(0, $classes, ($batch, 1)).squeeze(1)   # shape (N,)\n"
            "loss = F.cross_entropy(logits, labels)\n"
            "shown = tuple(labels.shape)",
        cause="With logits of shape (N, C), class-index targets must have shape (N,); a column (N, 1), as a "
              "Dataset returning [label] or a DataFrame column gives, reads as several targets per sample. "
              "Squeeze or view(-1) the labels.",
        expect="RuntimeError",
        params=({"classes": 3, "batch": 4}, {"classes": 10, "batch": 32}),
        sources=("https://github.com/Vidhiwar/multimodule-ecg-classification/issues/4",
                 "https://github.com/pytorch/pytorch/issues/3670",
                 "https://github.com/DeepRank/deeprank/issues/28"),
    ),
    Entry(
        id="cross-entropy-batch-size-mismatch", stage="step", chapter=3,
        title="a flatten with a hard-coded size turned the batch into more rows than there are targets",
        code="torch.manual_seed(0)\n"
             "feats = torch.randn($batch, 16, 5, 5)           # conv features: 400 per sample\n"
             "logits = nn.Linear($flat, 10)(feats.view(-1, $flat))\n"
             "loss = F.cross_entropy(logits, torch.randint(0, 10, ($batch,)))",
        fix="torch.manual_seed(0)\n"
            "feats = torch.randn($batch, 16, 5, 5)\n"
            "logits = nn.Linear(400, 10)(feats.flatten(1))   # keep the batch dimension\n"
            "loss = F.cross_entropy(logits, torch.randint(0, 10, ($batch,)))\n"
            "shown = tuple(logits.shape)",
        cause="The logits and the targets disagree on the number of samples; usually x.view(-1, k) with a k "
              "that does not match the features per sample folds several samples into one row or splits one into "
              "several. Flatten with x.flatten(1) or x.view(x.size(0), -1).",
        expect="ValueError",
        params=({"batch": 4, "flat": 200}, {"batch": 6, "flat": 100}),
        sources=("https://github.com/pytorch/pytorch/issues/139031",
                 "https://github.com/xinge008/Cylinder3D/issues/128"),
    ),
    Entry(
        id="cross-entropy-target-out-of-bounds", stage="step", chapter=5,
        title="class labels numbered 1..C instead of 0..C-1",
        code="torch.manual_seed(0)\n"
             "labels = torch.tensor($labels)           # classes numbered from 1, as in the CSV\n"
             "logits = nn.Linear(8, $classes)(torch.randn(len(labels), 8))\n"
             "loss = F.cross_entropy(logits, labels)",
        fix="torch.manual_seed(0)\n"
            "labels = torch.tensor($labels) - 1       # 0 .. C-1\n"
            "logits = nn.Linear(8, $classes)(torch.randn(len(labels), 8))\n"
            "loss = F.cross_entropy(logits, labels)\n"
            "shown = (int(labels.min()), int(labels.max()))",
        cause="A target index is >= the number of classes (or negative): labels counted from 1, a mask with "
              "pixel values 0..255, or a head sized for fewer classes. On a GPU the same mistake is a "
              "'CUDA error: device-side assert triggered' (Assertion `t >= 0 && t < n_classes` failed) that can "
              "surface at a later call; rerun on the CPU to see this message.",
        expect="IndexError",
        params=({"classes": 5, "labels": "[1, 2, 3, 4, 5]"}, {"classes": 10, "labels": "[3, 10, 1, 7]"}),
        sources=("https://github.com/milesial/Pytorch-UNet/issues/291",
                 "https://github.com/TencentGameMate/gnn_cross_lingual/issues/5",
                 "https://github.com/aws/studio-lab-examples/issues/236"),
    ),
    Entry(
        id="bce-target-size", stage="step", chapter=3,
        title="BCEWithLogitsLoss got logits of shape (N, 1) and targets of shape (N,)",
        code="torch.manual_seed(0)\n"
             "logits = nn.Linear(8, 1)(torch.randn($batch, 8))        # (N, 1)\n"
             "targets = torch.randint(0, 2, ($batch,)).float()         # (N,)\n"
             "loss = nn.BCEWithLogitsLoss()(logits, targets)",
        fix="torch.manual_seed(0)\n"
            "logits = nn.Linear(8, 1)(torch.randn($batch, 8)).squeeze(1)   # (N,)\n"
            "targets = torch.randint(0, 2, ($batch,)).float()\n"
            "loss = nn.BCEWithLogitsLoss()(logits, targets)\n"
            "shown = tuple(logits.shape)",
        cause="Binary cross-entropy compares input and target element by element, so both must have the same "
              "shape; a one-unit output layer gives (N, 1) while labels come as (N,). Squeeze the output or "
              "unsqueeze the targets.",
        expect="ValueError",
        params=({"batch": 4}, {"batch": 32}),
        sources=("https://github.com/pytorch/pytorch/issues/25663",
                 "https://github.com/milesial/Pytorch-UNet/issues/244"),
    ),
    Entry(
        id="bce-integer-target", stage="step", chapter=3,
        title="BCEWithLogitsLoss got integer (0/1) targets",
        code="torch.manual_seed(0)\n"
             "logits = nn.Linear(8, 1)(torch.randn(6, 8)).squeeze(1)\n"
             "targets = torch.tensor([0, 1, 1, 0, 1, 0], dtype=torch.$dtype)\n"
             "loss = nn.BCEWithLogitsLoss()(logits, targets)",
        fix="torch.manual_seed(0)\n"
            "logits = nn.Linear(8, 1)(torch.randn(6, 8)).squeeze(1)\n"
            "targets = torch.tensor([0, 1, 1, 0, 1, 0], dtype=torch.$dtype).float()\n"
            "loss = nn.BCEWithLogitsLoss()(logits, targets)\n"
            "shown = str(targets.dtype)",
        cause="Binary cross-entropy treats targets as probabilities, so they must be floating point like the "
              "logits; integer class labels make torch try to write a float result into an integer tensor. "
              "Convert them with .float().",
        expect="RuntimeError",
        params=({"dtype": "int64"}, {"dtype": "int32"}),
        sources=("https://github.com/ando-khachatryan/HiDDeN/issues/28",
                 "https://github.com/PacktPublishing/Mastering-PyTorch/issues/4",
                 "https://github.com/skorch-dev/skorch/issues/813"),
    ),
    Entry(
        id="bce-input-not-probability", stage="step", chapter=5,
        title="raw logits passed to BCELoss (the sigmoid is missing)",
        code="torch.manual_seed(0)\n"
             "logits = nn.Linear(8, 1)(torch.randn($batch, 8)).squeeze(1)   # no sigmoid at the end of the model\n"
             "targets = torch.randint(0, 2, ($batch,)).float()\n"
             "loss = nn.BCELoss()(logits, targets)",
        fix="torch.manual_seed(0)\n"
            "logits = nn.Linear(8, 1)(torch.randn($batch, 8)).squeeze(1)\n"
            "targets = torch.randint(0, 2, ($batch,)).float()\n"
            "loss = nn.BCEWithLogitsLoss()(logits, targets)   # the sigmoid inside, numerically stable\n"
            "shown = round(float(loss), 2)  # two decimals: what another CPU computes agrees",
        cause="BCELoss takes probabilities in [0, 1], but a model ending in a Linear layer gives logits of any "
              "sign; use BCEWithLogitsLoss on the logits. On a GPU the same mistake is a device-side assert "
              "(CUDA error: device-side assert triggered) rather than this message.",
        expect="RuntimeError",
        params=({"batch": 8}, {"batch": 64}),
        sources=("https://github.com/ray-project/ray/issues/17117",
                 "https://github.com/pytorch/pytorch/issues/1010"),
    ),
    Entry(
        id="mse-target-size-broadcast", stage="step", chapter=5,
        title="MSELoss between an output of shape (N, 1) and targets of shape (N,)",
        code="torch.manual_seed(0)\n"
             "pred = nn.Linear(4, 1)(torch.randn($batch, 4))     # (N, 1)\n"
             "y = torch.randn($batch)                             # (N,)\n"
             "loss = nn.$loss()(pred, y)                          # broadcasts to (N, N): trains on the wrong thing",
        fix="torch.manual_seed(0)\n"
            "pred = nn.Linear(4, 1)(torch.randn($batch, 4)).squeeze(1)   # (N,)\n"
            "y = torch.randn($batch)\n"
            "loss = nn.$loss()(pred, y)\n"
            "shown = tuple(pred.shape)",
        cause="Only a warning: (N, 1) against (N,) broadcasts to an (N, N) table of every prediction against every "
              "target, so the loss is finite, the code runs, and the model learns to predict the mean. Make the "
              "shapes equal.",
        expect="UserWarning",
        params=({"batch": 4, "loss": "MSELoss"}, {"batch": 64, "loss": "L1Loss"}),
        sources=("https://github.com/deepset-ai/FARM/issues/229",
                 "https://github.com/Photon-AI-Research/NeuralSolvers/issues/20",
                 "https://github.com/sunwuzhou03/reinforcement-learning-lab/issues/1"),
    ),
    Entry(
        id="input-dtype-differs-from-weights", stage="step", chapter=3,
        title="a batch whose dtype differs from the weights' (a float64 numpy array, a model cast to bfloat16)",
        code="rng = np.random.default_rng(0)\n"
             "model = nn.Linear($n_in, 2)$cast\n"
             "x = torch.from_numpy(rng.random(($batch, $n_in))$astype)   # numpy's default dtype is float64\n"
             "out = model(x)",
        fix="rng = np.random.default_rng(0)\n"
            "model = nn.Linear($n_in, 2)$cast\n"
            "x = torch.from_numpy(rng.random(($batch, $n_in))$astype)\n"
            "out = model(x.to(model.weight.dtype))              # the batch in the weights' dtype\n"
            "shown = str(out.dtype)",
        cause="A matrix product needs both operands in one dtype and nothing casts outside autocast: numpy arrays "
              "and pandas columns are float64 (torch.from_numpy keeps it) while weights are float32, and a model "
              "cast with .half() or .to(torch.bfloat16) meets a float32 batch. Cast the batch with .float() or "
              ".to(model.weight.dtype), or keep float32 weights and use torch.autocast.",
        expect="RuntimeError",
        params=({"n_in": 3, "batch": 4, "cast": "", "astype": ""},
                {"n_in": 20, "batch": 16, "cast": ".to(torch.bfloat16)", "astype": ".astype(np.float32)"}),
        sources=("https://github.com/theislab/scarches/issues/246",
                 "https://github.com/xianglin226/scMDC/issues/8",
                 "https://github.com/Lakonik/ComfyUI-piFlow/issues/18"),
    ),
    Entry(
        id="bce-target-dtype-found-expected-float", stage="step", chapter=3,
        title="BCELoss got float64 (or int64) targets from numpy",
        code="torch.manual_seed(0)\n"
             "probs = torch.sigmoid(nn.Linear(4, 1)(torch.randn(6, 4)))\n"
             "targets = torch.from_numpy(np.array([0, 1, 1, 0, 1, 0], dtype=np.$dtype)).view(-1, 1)\n"
             "loss = nn.BCELoss()(probs, targets)",
        fix="torch.manual_seed(0)\n"
            "probs = torch.sigmoid(nn.Linear(4, 1)(torch.randn(6, 4)))\n"
            "targets = torch.from_numpy(np.array([0, 1, 1, 0, 1, 0], dtype=np.$dtype)).view(-1, 1).float()\n"
            "loss = nn.BCELoss()(probs, targets)\n"
            "shown = str(targets.dtype)",
        cause="The target's dtype must match the input's (float32), but targets built from numpy arrive as "
              "float64 or int64; some losses raise it in the forward, others (MSELoss in older torch) only in "
              "backward(). Convert the targets with .float().",
        expect="RuntimeError",
        params=({"dtype": "float64"}, {"dtype": "int64"}),
        sources=("https://github.com/huggingface/sentence-transformers/issues/770",
                 "https://github.com/pytorch/pytorch/issues/45373",
                 "https://github.com/pytorch/pytorch/issues/2138"),
    ),
    Entry(
        id="conv-input-channels", stage="step", chapter=3,
        title="grayscale images fed to a convolution built for RGB (or the reverse)",
        code="torch.manual_seed(0)\n"
             "conv = nn.Conv2d($conv_in, 16, 3)\n"
             "images = torch.randn($batch, $img_ch, $size, $size)\n"
             "out = conv(images)",
        fix="torch.manual_seed(0)\n"
            "conv = nn.Conv2d($img_ch, 16, 3)     # in_channels = the images' channels (or convert the images)\n"
            "images = torch.randn($batch, $img_ch, $size, $size)\n"
            "out = conv(images)\n"
            "shown = tuple(out.shape)",
        cause="A convolution's in_channels must equal the input's dimension 1: MNIST-style grayscale (1 channel) "
              "into a network built for RGB (3), or images in (N, H, W, C) order so that H reads as channels. "
              "Match in_channels, convert the images, or permute to (N, C, H, W).",
        expect="RuntimeError",
        params=({"conv_in": 3, "img_ch": 1, "batch": 4, "size": 28},
                {"conv_in": 1, "img_ch": 3, "batch": 2, "size": 32}),
        sources=("https://github.com/avBuffer/UNet3plus_pth/issues/19",
                 "https://github.com/LambdaLabsML/examples/issues/39",
                 "https://github.com/zshuai8/FedGMM_ICML2023/issues/2"),
    ),
    Entry(
        id="view-on-non-contiguous", stage="step", chapter=3,
        title=".view() on a transposed (non-contiguous) tensor",
        code="torch.manual_seed(0)\n"
             "out = torch.randn($batch, $seq, $hidden)       # (N, T, H) from a sequence model\n"
             "flat = out.transpose(1, 2).view($batch, -1)     # transpose changes the strides, not the memory",
        fix="torch.manual_seed(0)\n"
            "out = torch.randn($batch, $seq, $hidden)\n"
            "flat = out.transpose(1, 2).reshape($batch, -1)  # or .contiguous().view(...)\n"
            "shown = tuple(flat.shape)",
        cause="view() never copies, so it needs memory laid out in the requested order; after transpose, permute "
              "or some slicing it is not. Use reshape(), which copies when it must, or .contiguous() first.",
        expect="RuntimeError",
        params=({"batch": 4, "seq": 3, "hidden": 5}, {"batch": 8, "seq": 12, "hidden": 32}),
        sources=("https://github.com/sergeywong/cp-vton/issues/30",
                 "https://github.com/open-mmlab/mmpretrain/pull/104",
                 "https://github.com/chikuanlin/re3-pytorch/issues/2"),
    ),
    Entry(
        id="view-shape-invalid", stage="step", chapter=3,
        title="a flatten to a hard-coded size that the features do not have",
        code="torch.manual_seed(0)\n"
             "feats = torch.randn($batch, $ch, $hw, $hw)     # conv output for this image size\n"
             "flat = feats.view($batch, $flat)               # size computed for another image size",
        fix="torch.manual_seed(0)\n"
            "feats = torch.randn($batch, $ch, $hw, $hw)\n"
            "flat = feats.flatten(1)                         # and size the next Linear from flat.shape[1]\n"
            "shown = tuple(flat.shape)",
        cause="The requested shape needs a different number of elements than the tensor has, usually because the "
              "flatten size was worked out for another input size or architecture. Use x.flatten(1) and size the "
              "next layer from one dry run (or nn.LazyLinear).",
        expect="RuntimeError",
        params=({"batch": 4, "ch": 20, "hw": 2, "flat": 100},
                {"batch": 8, "ch": 16, "hw": 5, "flat": 256}),
        sources=("https://github.com/pytorch/pytorch/issues/38469",
                 "https://github.com/weka511/hpa-scc/issues/38"),
    ),
    Entry(
        id="embedding-index-out-of-range", stage="step", chapter=3,
        title="a token id as large as the Embedding's num_embeddings",
        code="torch.manual_seed(0)\n"
             "emb = nn.Embedding($vocab, 8)                    # sized len(vocab), forgot the padding/unknown id\n"
             "ids = torch.tensor([[1, 2, $bad], [0, 3, 4]])\n"
             "out = emb(ids)",
        fix="torch.manual_seed(0)\n"
            "emb = nn.Embedding($bad + 1, 8)                  # num_embeddings = largest id + 1\n"
            "ids = torch.tensor([[1, 2, $bad], [0, 3, 4]])\n"
            "out = emb(ids)\n"
            "shown = tuple(out.shape)",
        cause="Embedding ids must lie in 0 .. num_embeddings-1; an id equal to the vocabulary size (a padding or "
              "unknown token added after the layer was sized, a tokenizer with more tokens than the model) is "
              "out of range (on a GPU, a device-side assert rather than this IndexError).",
        expect="IndexError",
        params=({"vocab": 10, "bad": 10}, {"vocab": 5000, "bad": 5003}),
        sources=("https://github.com/karpathy/ng-video-lecture/issues/20",
                 "https://github.com/ajhalthor/Transformer-Neural-Network/issues/13"),
    ),
    Entry(
        id="lstm-hidden-batch-size", stage="step", chapter=5,
        title="an initial LSTM state built for the full batch size, fed the smaller last batch",
        code="torch.manual_seed(0)\n"
             "lstm = nn.LSTM(10, $hidden, batch_first=True)\n"
             "h0 = (torch.zeros(1, $batch, $hidden), torch.zeros(1, $batch, $hidden))   # built once, for batch_size\n"
             "x = torch.randn($last, 7, 10)                    # the last batch of the epoch is smaller\n"
             "out, _ = lstm(x, h0)",
        fix="torch.manual_seed(0)\n"
            "lstm = nn.LSTM(10, $hidden, batch_first=True)\n"
            "x = torch.randn($last, 7, 10)\n"
            "h0 = (torch.zeros(1, x.size(0), $hidden), torch.zeros(1, x.size(0), $hidden))   # from this batch\n"
            "out, _ = lstm(x, h0)\n"
            "shown = tuple(out.shape)",
        cause="The hidden state's batch dimension must equal the input's; a state made once for batch_size fails "
              "on the epoch's last, smaller batch (or at evaluation with another batch size). Build it from "
              "x.size(0), pass none (zeros are the default), or use drop_last=True.",
        expect="RuntimeError",
        params=({"hidden": 20, "batch": 8, "last": 4}, {"hidden": 64, "batch": 32, "last": 7}),
        sources=("https://github.com/miyamotok0105/pytorch_handbook/issues/11",
                 "https://github.com/MUST-Deep-Learning/KnowIt/issues/252",
                 "https://github.com/PetrochukM/PyTorch-NLP/issues/51"),
    ),
    Entry(
        id="optimizer-empty-parameter-list", stage="step", chapter=3,
        title="layers kept in a plain Python list, so the model has no parameters",
        code="class Net(nn.Module):\n"
             "    def __init__(self):\n"
             "        super().__init__()\n"
             "        self.layers = [nn.Linear($width, $width) for _ in range($depth)]   # a list: not registered\n"
             "    def forward(self, x):\n"
             "        for layer in self.layers:\n"
             "            x = layer(x)\n"
             "        return x\n"
             "opt = torch.optim.$opt(Net().parameters(), lr=0.01)",
        fix="class Net(nn.Module):\n"
            "    def __init__(self):\n"
            "        super().__init__()\n"
            "        self.layers = nn.ModuleList(nn.Linear($width, $width) for _ in range($depth))\n"
            "    def forward(self, x):\n"
            "        for layer in self.layers:\n"
            "            x = layer(x)\n"
            "        return x\n"
            "net = Net()\n"
            "opt = torch.optim.$opt(net.parameters(), lr=0.01)\n"
            "shown = len(list(net.parameters()))",
        cause="model.parameters() found nothing: layers in a Python list or dict (use nn.ModuleList / "
              "nn.ModuleDict), layers created in forward() instead of __init__, or a filter on requires_grad "
              "after freezing everything.",
        expect="ValueError",
        params=({"width": 8, "depth": 2, "opt": "SGD"}, {"width": 32, "depth": 4, "opt": "Adam"}),
        sources=("https://github.com/pytorch/pytorch/issues/50402",
                 "https://github.com/lxztju/pytorch_classification/issues/13",
                 "https://github.com/danieltan07/learning-to-reweight-examples/issues/6"),
    ),
    Entry(
        id="anomaly-nan-in-backward", stage="step", chapter=3,
        title="anomaly detection names the operation whose gradient is NaN",
        code="torch.manual_seed(0)\n"
             "p = torch.randn(4, 3, requires_grad=True)\n"
             "probs = torch.softmax(p, 1) * torch.tensor([1.0, 1.0, 0.0])   # one class masked out: probability 0\n"
             "with torch.autograd.set_detect_anomaly(True):       # turned on to find where the NaN comes from\n"
             "    loss = $loss\n"
             "    loss.backward()",
        fix="torch.manual_seed(0)\n"
            "p = torch.randn(4, 3, requires_grad=True)\n"
            "probs = torch.softmax(p, 1) * torch.tensor([1.0, 1.0, 0.0])\n"
            "with torch.autograd.set_detect_anomaly(True):\n"
            "    loss = $safe\n"
            "    loss.backward()\n"
            "shown = bool(torch.isfinite(p.grad).all())",
        cause="With anomaly detection on, backward stops at the first function whose gradient holds a NaN and names "
              "it (the warning above it shows the forward line). Typical sources: sqrt or ** 0.5 at exactly 0 "
              "(a distance of a point to itself), log of 0, 0/0; add a small epsilon or clamp before the function.",
        expect="RuntimeError",
        params=({"loss": "torch.sqrt(((p - p.detach()) ** 2).sum(1)).mean()",
                 "safe": "torch.sqrt(((p - p.detach()) ** 2).sum(1) + 1e-12).mean()"},
                {"loss": "-(probs * torch.log(probs)).sum(1).mean()",
                 "safe": "-(probs * torch.log(probs.clamp_min(1e-12))).sum(1).mean()"}),
        sources=("https://github.com/pytorch/pytorch/issues/38714",
                 "https://github.com/pytorch/pytorch/issues/51196",
                 "https://github.com/leftthomas/CGD/issues/12"),
    ),
    Entry(
        id="optimizer-non-leaf-tensor", stage="step", chapter=3,
        title="an optimizer given a tensor made by an operation on a requires_grad tensor",
        code="torch.manual_seed(0)\n"
             "w = torch.randn($n, 1, requires_grad=True)$op      # the result of an operation, not a leaf\n"
             "opt = torch.optim.$opt([w], lr=0.1)",
        fix="torch.manual_seed(0)\n"
            "w = (torch.randn($n, 1)$op).requires_grad_()       # operate first, then ask for gradients\n"
            "opt = torch.optim.$opt([w], lr=0.1)\n"
            "shown = w.is_leaf",
        cause="An optimizer can only update leaf tensors, those created by you rather than computed; "
              "torch.randn(..., requires_grad=True) * 0.01, or .to(device)/.double()/.cuda() after "
              "requires_grad=True, returns a computed tensor whose gradient would never be stored. Scale or move "
              "first and set requires_grad last (or use nn.Parameter).",
        expect="ValueError",
        params=({"n": 3, "op": " * 0.01", "opt": "SGD"}, {"n": 10, "op": ".to(torch.float64)", "opt": "Adam"}),
        sources=("https://github.com/pytorch/pytorch/issues/140469",
                 "https://github.com/vinsis/ternary-quantization/issues/4",
                 "https://github.com/mazzzystar/randomCNN-voice-transfer/issues/16"),
    ),
    Entry(
        id="leaf-inplace-manual-update", stage="step", chapter=3,
        title="a hand-written gradient step on a weight, outside torch.no_grad()",
        code="torch.manual_seed(0)\n"
             "w = torch.randn($n, 1, requires_grad=True)\n"
             "loss = ((torch.randn(8, $n) @ w) ** 2).mean()\n"
             "loss.backward()\n"
             "$update",
        fix="torch.manual_seed(0)\n"
            "w = torch.randn($n, 1, requires_grad=True)\n"
            "loss = ((torch.randn(8, $n) @ w) ** 2).mean()\n"
            "loss.backward()\n"
            "with torch.no_grad():                   # the update itself must not be recorded\n"
            "    $update\n"
            "shown = w.requires_grad",
        cause="A tensor created with requires_grad=True (a leaf, like every nn.Parameter) cannot be changed in "
              "place while autograd records, since its gradient would refer to a value that no longer exists. "
              "Do manual updates and weight edits under torch.no_grad() (or let an optimizer do them).",
        expect="RuntimeError",
        params=({"n": 3, "update": "w -= 0.1 * w.grad"},
                {"n": 10, "update": "w.add_(w.grad, alpha=-0.01)"}),
        sources=("https://github.com/pytorch/examples/pull/779",
                 "https://github.com/BaiTheBest/SparseLLM/issues/13",
                 "https://github.com/divelab/DIG/issues/164"),
    ),
    Entry(
        id="scheduler-step-before-optimizer-step", stage="step", chapter=7,
        title="scheduler.step() called before optimizer.step()",
        code="torch.manual_seed(0)\n"
             "model = nn.Linear(4, 1)\n"
             "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
             "sched = torch.optim.lr_scheduler.$sched\n"
             "for step in range(2):\n"
             "    loss = F.mse_loss(model(torch.randn(8, 4)), torch.randn(8, 1))\n"
             "    opt.zero_grad()\n"
             "    loss.backward()\n"
             "    sched.step()                       # before the update\n"
             "    opt.step()",
        fix="torch.manual_seed(0)\n"
            "model = nn.Linear(4, 1)\n"
            "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "sched = torch.optim.lr_scheduler.$sched\n"
            "for step in range(2):\n"
            "    loss = F.mse_loss(model(torch.randn(8, 4)), torch.randn(8, 1))\n"
            "    opt.zero_grad()\n"
            "    loss.backward()\n"
            "    opt.step()\n"
            "    sched.step()                       # after the update\n"
            "shown = round(opt.param_groups[0]['lr'], 6)",
        cause="A warning: the schedule's first value is skipped because the scheduler moved before any update. "
              "It also appears, harmlessly, when a GradScaler skips the first step (an inf in the fp16 "
              "gradients), even though the loop's order is right.",
        expect="UserWarning",
        params=({"sched": "StepLR(opt, step_size=1, gamma=0.5)"},
                {"sched": "CosineAnnealingLR(opt, T_max=10)"}),
        sources=("https://github.com/zju3dv/NeuralRecon/issues/51",
                 "https://github.com/princeton-vl/RAFT/issues/104",
                 "https://github.com/ThilinaRajapakse/pytorch-transformers-classification/issues/21"),
    ),
    Entry(
        id="plateau-step-without-metric", stage="step", chapter=7,
        title="ReduceLROnPlateau.step() called without the monitored value",
        code="torch.manual_seed(0)\n"
             "model = nn.Linear(4, 1)\n"
             "opt = torch.optim.$opt(model.parameters(), lr=0.1)\n"
             "sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, $mode)\n"
             "loss = F.mse_loss(model(torch.randn(8, 4)), torch.randn(8, 1))\n"
             "opt.zero_grad()\n"
             "loss.backward()\n"
             "opt.step()\n"
             "sched.step()                           # as for every other scheduler",
        fix="torch.manual_seed(0)\n"
            "model = nn.Linear(4, 1)\n"
            "opt = torch.optim.$opt(model.parameters(), lr=0.1)\n"
            "sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, $mode)\n"
            "loss = F.mse_loss(model(torch.randn(8, 4)), torch.randn(8, 1))\n"
            "opt.zero_grad()\n"
            "loss.backward()\n"
            "opt.step()\n"
            "val_loss = float(loss)                 # the validation metric, once per epoch\n"
            "sched.step(val_loss)\n"
            "shown = opt.param_groups[0]['lr']",
        cause="ReduceLROnPlateau decides from a measured value (usually the validation loss), so its step() "
              "requires it; generic training loops and libraries that call scheduler.step() with no argument "
              "break on it.",
        expect="TypeError",
        params=({"opt": "SGD", "mode": "\"min\""}, {"opt": "Adam", "mode": "\"max\""}),
        sources=("https://github.com/junyanz/pytorch-CycleGAN-and-pix2pix/issues/495",
                 "https://github.com/victoresque/pytorch-template/issues/89",
                 "https://github.com/mittagessen/kraken/issues/635"),
        python_note="Python's own missing-argument text: Python 3.10 and later (3.11 and 3.13 alike) name the "
                    "method as 'ReduceLROnPlateau.step()'; Python 3.9 and earlier wrote 'step()'.",
    ),
    Entry(
        id="onecycle-stepped-past-total", stage="step", chapter=7,
        title="OneCycleLR stepped more times than its total_steps",
        code="torch.manual_seed(0)\n"
             "model = nn.Linear(4, 1)\n"
             "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
             "sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, epochs=$epochs, steps_per_epoch=$spe)\n"
             "for epoch in range($epochs):\n"
             "    for batch in range($batches):          # the loader has more batches than steps_per_epoch\n"
             "        opt.step()\n"
             "        sched.step()",
        fix="torch.manual_seed(0)\n"
            "model = nn.Linear(4, 1)\n"
            "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, epochs=$epochs, steps_per_epoch=$batches)\n"
            "for epoch in range($epochs):\n"
            "    for batch in range($batches):          # steps_per_epoch=len(train_loader)\n"
            "        opt.step()\n"
            "        sched.step()\n"
            "shown = sched.last_epoch",
        cause="OneCycleLR plans a fixed number of steps (total_steps, or epochs * steps_per_epoch) and refuses one "
              "more: steps_per_epoch differs from len(train_loader) (a changed batch size or dataset, gradient "
              "accumulation), the scheduler is stepped per batch but sized per epoch, or training runs extra epochs.",
        expect="ValueError",
        params=({"epochs": 2, "spe": 3, "batches": 4}, {"epochs": 3, "spe": 10, "batches": 12}),
        sources=("https://github.com/vLAR-group/GrowSP/issues/11",
                 "https://github.com/A4Bio/PiFold/issues/6",
                 "https://github.com/flairNLP/flair/issues/2954"),
    ),
    # ---- mixed precision (chapter 7) ----
    Entry(
        id="autocast-output-used-outside", stage="precision", chapter=7,
        title="an autocast output used in a matrix product after the autocast block",
        code="torch.manual_seed(0)\n"
             "model = nn.Linear(8, 8)\n"
             "with torch.autocast(\"cpu\", dtype=torch.$dtype):\n"
             "    h = model(torch.randn($batch, 8))             # h comes out in the low-precision dtype\n"
             "scores = h @ torch.randn(8, 3)                    # outside the region: no cast any more",
        fix="torch.manual_seed(0)\n"
            "model = nn.Linear(8, 8)\n"
            "with torch.autocast(\"cpu\", dtype=torch.$dtype):\n"
            "    h = model(torch.randn($batch, 8))\n"
            "    scores = h @ torch.randn(8, 3)                 # inside the region (or h.float() @ ...)\n"
            "shown = str(scores.dtype)",
        cause="Autocast casts only inside its region; the outputs it produced stay bfloat16/float16, so a later "
              "matmul with a float32 tensor outside the block mixes dtypes. Keep the computation inside the block "
              "or cast the output back with .float().",
        expect="RuntimeError",
        params=({"dtype": "bfloat16", "batch": 4}, {"dtype": "float16", "batch": 6}),
        sources=("https://github.com/karpathy/nanochat/pull/224",
                 "https://github.com/shibing624/MedicalGPT/issues/456",
                 "https://github.com/hiyouga/LlamaFactory/issues/2022"),
    ),
    Entry(
        id="masked-fill-overflows-half", stage="precision", chapter=7,
        title="an attention mask filled with -1e9 in float16",
        code="torch.manual_seed(0)\n"
             "q, k = torch.randn(2, $t, 8), torch.randn(2, $t, 8)\n"
             "mask = torch.ones($t, $t, dtype=torch.bool).triu(1)\n"
             "with torch.autocast(\"cpu\", dtype=torch.float16):\n"
             "    scores = (q @ k.transpose(1, 2)).masked_fill(mask, $value)   # scores are float16 here",
        fix="torch.manual_seed(0)\n"
            "q, k = torch.randn(2, $t, 8), torch.randn(2, $t, 8)\n"
            "mask = torch.ones($t, $t, dtype=torch.bool).triu(1)\n"
            "with torch.autocast(\"cpu\", dtype=torch.float16):\n"
            "    scores = q @ k.transpose(1, 2)\n"
            "    scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)   # or float('-inf')\n"
            "shown = str(scores.dtype)",
        cause="float16 holds magnitudes up to 65,504, so a fill value like -1e9 (or float32's minimum) cannot be "
              "stored. Use torch.finfo(scores.dtype).min or float('-inf'), or bfloat16, which has float32's range.",
        expect="RuntimeError",
        params=({"t": 4, "value": "-1e9"}, {"t": 6, "value": "torch.finfo(torch.float32).min"}),
        sources=("https://github.com/NVIDIA/apex/issues/1052",
                 "https://github.com/NVIDIA/apex/issues/1105",
                 "https://github.com/QwenLM/Qwen/issues/32"),
    ),
    Entry(
        id="gradscaler-unscale-twice", stage="precision", chapter=7,
        title="scaler.unscale_() on every micro-batch of gradient accumulation",
        code="torch.manual_seed(0)\n"
             "model = nn.Linear(4, 1)\n"
             "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
             "scaler = torch.amp.GradScaler(\"cpu\")\n"
             "for i in range($accum):\n"
             "    loss = F.mse_loss(model(torch.randn(8, 4)), torch.randn(8, 1)) / $accum\n"
             "    scaler.scale(loss).backward()\n"
             "    scaler.unscale_(opt)                   # to clip, on every micro-batch\n"
             "    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
             "    if (i + 1) % $accum == 0:\n"
             "        scaler.step(opt)\n"
             "        scaler.update()\n"
             "        opt.zero_grad()",
        fix="torch.manual_seed(0)\n"
            "model = nn.Linear(4, 1)\n"
            "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "scaler = torch.amp.GradScaler(\"cpu\")\n"
            "for i in range($accum):\n"
            "    loss = F.mse_loss(model(torch.randn(8, 4)), torch.randn(8, 1)) / $accum\n"
            "    scaler.scale(loss).backward()\n"
            "    if (i + 1) % $accum == 0:\n"
            "        scaler.unscale_(opt)               # once, right before the step\n"
            "        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
            "        scaler.step(opt)\n"
            "        scaler.update()\n"
            "        opt.zero_grad()\n"
            "shown = scaler.get_scale()",
        cause="unscale_() divides the gradients by the scale, so it may run once per optimizer between two "
              "update() calls; with gradient accumulation (or a second clip) it was called again before the "
              "step. Unscale and clip only on the micro-batch that steps.",
        expect="RuntimeError",
        params=({"accum": 2}, {"accum": 4}),
        sources=("https://github.com/huggingface/transformers/issues/24449",
                 "https://github.com/hiyouga/LlamaFactory/issues/77",
                 "https://github.com/espnet/espnet/pull/2362"),
    ),
    Entry(
        id="gradscaler-fp16-parameters", stage="precision", chapter=7,
        title="a GradScaler used with a model whose weights are float16",
        code="torch.manual_seed(0)\n"
             "model = nn.Linear(4, 1).to(torch.float16)         # model.half(): the weights themselves in fp16\n"
             "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
             "scaler = torch.amp.GradScaler(\"cpu\")\n"
             "loss = model(torch.randn(8, 4, dtype=torch.float16)).float().mean()\n"
             "scaler.scale(loss).backward()\n"
             "scaler.$call(opt)",
        fix="torch.manual_seed(0)\n"
            "model = nn.Linear(4, 1)                            # float32 master weights\n"
            "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "scaler = torch.amp.GradScaler(\"cpu\")\n"
            "with torch.autocast(\"cpu\", dtype=torch.float16):  # fp16 compute, fp32 weights and gradients\n"
            "    loss = model(torch.randn(8, 4)).float().mean()\n"
            "scaler.scale(loss).backward()\n"
            "scaler.$call(opt)\n"
            "shown = str(model.weight.grad.dtype)",
        cause="Mixed precision keeps float32 weights and lets autocast run the forward in float16; a GradScaler "
              "refuses float16 gradients, which come from parameters cast with .half() (or a model loaded with "
              "torch_dtype=float16). Keep the trainable parameters in float32.",
        expect="ValueError",
        params=({"call": "step"}, {"call": "unscale_"}),
        sources=("https://github.com/haotian-liu/LLaVA/issues/363",
                 "https://github.com/mk-minchul/AdaFace/issues/127",
                 "https://github.com/Facico/Chinese-Vicuna/issues/168"),
    ),
    Entry(
        id="gradscaler-no-inf-checks", stage="precision", chapter=7,
        title="scaler.step() on an optimizer whose parameters got no gradient",
        code="torch.manual_seed(0)\n"
             "backbone, head, spare = nn.Linear(4, 8), nn.Linear(8, 1), nn.Linear(8, 1)\n"
             "for p in backbone.parameters():\n"
             "    p.requires_grad_(False)                      # frozen\n"
             "opt = torch.optim.SGD($group.parameters(), lr=0.1)   # the optimizer holds the wrong module\n"
             "scaler = torch.amp.GradScaler(\"cpu\")\n"
             "loss = F.mse_loss(head(backbone(torch.randn(8, 4))), torch.randn(8, 1))\n"
             "scaler.scale(loss).backward()\n"
             "scaler.step(opt)",
        fix="torch.manual_seed(0)\n"
            "backbone, head, spare = nn.Linear(4, 8), nn.Linear(8, 1), nn.Linear(8, 1)\n"
            "for p in backbone.parameters():\n"
            "    p.requires_grad_(False)\n"
            "model = nn.Sequential(backbone, head)\n"
            "opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)\n"
            "scaler = torch.amp.GradScaler(\"cpu\")\n"
            "loss = F.mse_loss(model(torch.randn(8, 4)), torch.randn(8, 1))\n"
            "scaler.scale(loss).backward()\n"
            "scaler.step(opt)\n"
            "scaler.update()\n"
            "shown = scaler.get_scale()",
        cause="scaler.step() looks for infs in the optimizer's gradients and found no gradient at all: its "
              "parameters are frozen, unused in the forward, or belong to another copy of the model (built before "
              "a .to(device) that replaced them, or a model other than the one that ran).",
        expect="AssertionError",
        params=({"group": "backbone"}, {"group": "spare"}),
        sources=("https://github.com/huggingface/accelerate/issues/328",
                 "https://github.com/NirAharon/BoT-SORT/issues/85",
                 "https://github.com/open-mmlab/mmsegmentation/issues/3230"),
    ),
    Entry(
        id="bfloat16-to-numpy", stage="precision", chapter=7,
        title="a bfloat16 output converted to numpy",
        code="torch.manual_seed(0)\n"
             "model = nn.Linear(4, $n_out).to(torch.bfloat16)\n"
             "out = model(torch.randn($batch, 4, dtype=torch.bfloat16))\n"
             "preds = $convert",
        fix="torch.manual_seed(0)\n"
            "model = nn.Linear(4, $n_out).to(torch.bfloat16)\n"
            "out = model(torch.randn($batch, 4, dtype=torch.bfloat16))\n"
            "preds = out.detach().float().cpu().numpy()   # numpy has no bfloat16: go through float32\n"
            "shown = str(preds.dtype)",
        cause="numpy has no bfloat16 type, so a bfloat16 tensor (a model run in bf16, outputs of bf16 autocast) "
              "cannot be converted directly; cast with .float() first.",
        expect="TypeError",
        params=({"n_out": 3, "batch": 4, "convert": "out.detach().numpy()"},
                {"n_out": 1, "batch": 8, "convert": "out.detach().cpu().numpy()"}),
        sources=("https://github.com/pytorch/pytorch/issues/110285",
                 "https://github.com/xwying/torchshow/issues/23"),
    ),
)
