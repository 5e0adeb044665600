"""The atlas's entries for the step's core (chapters 3 and 5): shapes, devices, the graph, leaves' gradients,
softmax's dim, a 0-dimensional loss indexed. What reaches the loss, layers, the optimizer and schedulers, and mixed precision have files of their own
(entries_losses.py, entries_loss_dtypes.py, entries_layers.py, entries_optim.py, entries_precision.py)."""
from __future__ import annotations

from course_utils.atlas.entry import Entry

ENTRIES = (
    Entry(
        id="mat1-mat2-shapes", stage="step", chapter=3,
        fix_line="nn.Linear(10, 5)   # in_features = the input's last dimension, x.shape[-1]",
        title="a Linear layer's in_features do not match the input's last dimension",
        code="nn.Linear($wanted, 5)(torch.randn(4, $given))",
        fix="shown = tuple(nn.Linear($given, 5)(torch.randn(4, $given)).shape)",
        cause="The input's last dimension must equal the layer's in_features; usually a flatten "
              "size computed for another image size, or a layer sized before a change upstream.",
        expect="RuntimeError",
        params=({"wanted": 20, "given": 10}, {"wanted": 784, "given": 3136}),
        sources=("https://discuss.pytorch.org/t/runtimeerror-mat1-and-mat2-shapes-cannot-be-multiplied/125563",
                 "https://github.com/magic282/SEASS/issues/11"),
        wordings=("size mismatch, m1: [64 x 256], m2: [512 x 512] at c:\\miniconda2\\conda-bld\\"
                  "pytorch-cpu_1519449358620\\work\\torch\\lib\\th\\generic/THTensorMath.c:1434",),
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
                 "https://github.com/alvinliu0/HumanGaussian/issues/25",
                 "https://github.com/kijai/ComfyUI-FluxTrainer/issues/116",
                 "https://github.com/wmyw96/FAST-NN/issues/1",
                 "https://github.com/HRNet/HigherHRNet-Human-Pose-Estimation/issues/75",
                 "https://github.com/inyeoplee77/SAGPool/issues/3",
                 "https://github.com/yuanyuanli85/Fast_Human_Pose_Estimation_Pytorch/issues/7"),
        wordings=("Expected object of device type cuda but got device type cpu for argument #1 'self' in call to "
                  "_thnn_conv2d_forward",
                  "Expected object of backend CUDA but got backend CPU for argument #2 'mat2'",
                  "Input type (torch.cuda.FloatTensor) and weight type (torch.FloatTensor) should be the same",
                  "Input type (torch.cuda.HalfTensor) and weight type (torch.HalfTensor) should be the same"),
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
                 "https://github.com/karpathy/nn-zero-to-hero/issues/31",
                 "https://github.com/longcw/faster_rcnn_pytorch/issues/90"),
        wordings=("Trying to backward through the graph a second time, but the buffers have already been freed. "
                  "Specify retain_graph=True when calling backward the first time.",),
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
        id="checkpoint-reentrant-no-grad-inputs", stage="step", chapter=3,
        title="gradient checkpointing (use_reentrant=True) on a block whose input needs no gradient",
        code="from torch.utils.checkpoint import checkpoint\n"
             "torch.manual_seed(0)\n"
             "frozen, block, head = nn.Linear(4, 8), nn.Linear(8, 8), nn.Linear(8, 1)\n"
             "frozen.requires_grad_(False)                  # a frozen backbone (or the raw batch) feeds the block\n"
             "head(checkpoint(block, frozen(torch.randn($batch, 4)), use_reentrant=True)).sum().backward()",
        fix="from torch.utils.checkpoint import checkpoint\n"
            "torch.manual_seed(0)\n"
            "frozen, block, head = nn.Linear(4, 8), nn.Linear(8, 8), nn.Linear(8, 1)\n"
            "frozen.requires_grad_(False)\n"
            "x = frozen(torch.randn($batch, 4)).requires_grad_()   # or use_reentrant=False, torch's recommendation\n"
            "head(checkpoint(block, x, use_reentrant=True)).sum().backward()\n"
            "shown = block.weight.grad is not None",
        cause="The reentrant checkpoint gives the checkpointed block gradients only if one of its inputs requires "
              "grad; fed a frozen layer's output or the raw batch, it gives none, and the block silently stops "
              "training while the loss still falls through the layers outside it (chapter 3 shows it). Pass "
              "use_reentrant=False, or make the input require grad (enable_input_require_grads() in Hugging Face).",
        expect="UserWarning",
        params=({"batch": 5}, {"batch": 16}),
        sources=("https://github.com/maciej-sypetkowski/kaggle-rcic-1st/issues/2",
                 "https://github.com/InternLM/InternLM-XComposer/issues/326",
                 "https://github.com/hiyouga/LlamaFactory/issues/6357",
                 "https://github.com/bitsandbytes-foundation/bitsandbytes/issues/182"),
    ),
    Entry(
        id="clip-grad-norm-nonfinite", stage="step", chapter=3,
        title="clip_grad_norm_ met a NaN or inf gradient",
        code="torch.manual_seed(0)\n"
             "model = nn.Linear(4, 1)\n"
             "loss = model(torch.randn(8, 4)).mean() * $blowup   # an overflow, a log(0), a divide by zero\n"
             "loss.backward()\n"
             "torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0, error_if_nonfinite=True)",
        fix="torch.manual_seed(0)\n"
            "model = nn.Linear(4, 1)\n"
            "loss = model(torch.randn(8, 4)).mean() * $blowup\n"
            "loss.backward()\n"
            "norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)\n"
            "if not torch.isfinite(norm):                 # skip this update (GradScaler does the same under AMP)\n"
            "    model.zero_grad()\n"
            "shown = bool(torch.isfinite(norm))",
        cause="Some gradient is NaN or inf (an overflow, log(0), 0/0 in the loss, or a learning rate that blew the "
              "weights up), so the total norm is too and clipping cannot scale it back. By default "
              "(error_if_nonfinite=False) torch only returns the non-finite norm and the step then writes NaN "
              "into the weights: check the norm and skip the update, and find where the NaN starts "
              "(torch.autograd.detect_anomaly, chapter 3).",
        expect="RuntimeError",
        params=({"blowup": "float('inf')"}, {"blowup": "float('nan')"}),
        sources=("https://github.com/ultralytics/yolov5/issues/11262",
                 "https://github.com/pytorch/pytorch/issues/46849",
                 "https://github.com/pytorch/pytorch/pull/55169"),
        wordings=("Non-finite norm encountered in torch.nn.utils.clip_grad_norm_; continuing anyway. Note that the "
                  "default behavior will change in a future release to error out if a non-finite total norm is "
                  "encountered. At that point, setting error_if_nonfinite=false will be required to retain the old "
                  "behavior.",),   # torch 1.9-1.13's FutureWarning (yolov5#11262)
    ),
    Entry(
        id="grad-none-before-backward", stage="step", chapter=3,
        title="an attribute read on None, in a loop most often p.grad.zero_() or p.grad.data on a parameter whose "
              ".grad is None (no backward yet, an unused parameter, or after zero_grad())",
        code="torch.manual_seed(0)\n"
             "model = nn.Linear(3, 1)\n"
             "for p in model.parameters():     # zeroing by hand before backward(), as pre-1.0 examples did\n"
             "    p.grad$op",
        fix="torch.manual_seed(0)\n"
            "model = nn.Linear(3, 1)\n"
            "for p in model.parameters():\n"
            "    if p.grad is not None:       # or optimizer.zero_grad(), which does this for every parameter\n"
            "        p.grad$op\n"
            "shown = [p.grad is None for p in model.parameters()]",
        cause="Something is None where the code expects an object: look at what the line reads the attribute from "
              "(a dataset whose image failed to load returns None, for one). In a training loop it is most often a "
              "gradient: a parameter's .grad is None until a backward() reaches it, so before the first backward, "
              "for a parameter the loss does not use (a frozen or unused layer), and after optimizer.zero_grad(), "
              "which since torch 2.0 sets gradients to None, not to zeros (set_to_none=True). Let zero_grad() "
              "clear them, or check `p.grad is not None` first; .data is not needed.",
        expect="AttributeError",
        params=({"op": ".zero_()"}, {"op": ".data.mul_(0.5)"}),
        sources=("https://github.com/jcjohnson/pytorch-examples/issues/7",
                 "https://github.com/yizt/Grad-CAM.pytorch/issues/27",
                 "https://github.com/learnables/learn2learn/issues/428",
                 "https://github.com/wiseodd/generative-models/issues/26"),
    ),
    Entry(
        id="grad-of-non-leaf", stage="step", chapter=3,
        title="read .grad of a tensor made by an operation (a weight moved with .to() or .cuda() after "
              "requires_grad=True, an input image for a saliency map, an activation)",
        code="torch.manual_seed(0)\n"
             "w = torch.randn($n, requires_grad=True)$move   # a cast or a move to a GPU makes a new tensor: not a leaf\n"
             "loss = (w ** 2).sum()\n"
             "loss.backward()\n"
             "grad = w.grad                                  # None, and torch says why",
        fix="torch.manual_seed(0)\n"
            "w = torch.randn($n)$move.requires_grad_()   # cast or moved first, then made a leaf that wants a gradient\n"
            "loss = (w ** 2).sum()\n"
            "loss.backward()\n"
            "grad = w.grad\n"
            "shown = grad is not None",
        cause="backward() fills .grad only on leaf tensors, the ones you created with requires_grad=True. A "
              "tensor made from one by an operation is not a leaf: .to(device) or .cuda() to another device, "
              ".double(), a slice or an activation, so the leaf got the gradient and the copy you kept gets None "
              "(an optimizer given it never moves the weight you use). On a CPU-only machine .to('cpu') returns the "
              "same tensor, so the bug appears only when the device changes. Create the tensor where it will "
              "live (torch.randn(..., device=d, requires_grad=True)) or call .requires_grad_() after the move; for "
              "an intermediate tensor whose gradient you want, call .retain_grad() on it before backward().",
        expect="UserWarning",
        params=({"n": 3, "move": ".double()"}, {"n": 5, "move": ".to(torch.float16)"}),
        sources=("https://github.com/pytorch/pytorch/issues/134398",
                 "https://github.com/learnables/learn2learn/issues/292"),
    ),
    Entry(
        id="softmax-implicit-dim", stage="step", chapter=3,
        title="softmax or log_softmax called without dim (F.softmax(x), nn.Softmax(), nn.LogSoftmax())",
        code="torch.manual_seed(0)\n"
             "scores = torch.randn($batch, $steps, $classes)   # (N, T, C): a score per class for each token\n"
             "probs = F.$fn(scores)                             # no dim: torch picks one",
        fix="torch.manual_seed(0)\n"
            "scores = torch.randn($batch, $steps, $classes)\n"
            "probs = F.$fn(scores, dim=-1)                     # over the classes, the last dimension\n"
            "guessed = F.$fn(scores, dim=0)                    # torch's guess for a 3-D input: over the batch\n"
            "ones = torch.ones($batch, $steps)\n"
            "shown = [bool(torch.allclose(p$back.sum(-1), ones)) for p in (probs, guessed)]   # classes sum to 1?",
        cause="Without dim, torch guesses and warns: dim 0 for a 0-, 1- or 3-dimensional input, dim 1 otherwise. For "
              "logits (N, C) the guess is right; for (N, T, C), a batch of sequences, dim 0 normalises each class "
              "across the batch, so the 'probabilities' of a token do not sum to 1 and the loss trains on the wrong "
              "thing without an error. Always pass dim (dim=-1 for classes last, dim=1 for (N, C, H, W)).",
        expect="UserWarning",
        params=({"batch": 2, "steps": 5, "classes": 3, "fn": "softmax", "back": ""},
                {"batch": 4, "steps": 7, "classes": 10, "fn": "log_softmax", "back": ".exp()"}),
        sources=("https://github.com/amdegroot/ssd.pytorch/issues/104",
                 "https://github.com/linnaeushuang/pensieve-pytorch/issues/4",
                 "https://github.com/suragnair/alpha-zero-general/issues/5",
                 "https://github.com/lucasjinreal/pytorch_chatbot/issues/4"),
    ),
    Entry(
        id="index-a-zero-dim-loss", stage="step", chapter=3,
        title="loss.data[0] (or total[0]) on a 0-dimensional tensor, in code written for torch 0.3",
        code="torch.manual_seed(0)\n"
             "model = nn.Linear(4, 1)\n"
             "loss = F.mse_loss(model(torch.randn(8, 4)), torch.randn(8, 1))   # a scalar: 0 dimensions\n"
             "running = $read                                # as torch 0.3 tutorials read it",
        fix="torch.manual_seed(0)\n"
            "model = nn.Linear(4, 1)\n"
            "loss = F.mse_loss(model(torch.randn(8, 4)), torch.randn(8, 1))\n"
            "running = $fixed                              # a Python number\n"
            "shown = type(running).__name__",
        cause="Since torch 0.4 a loss (and a .sum() or a count) is a 0-dimensional tensor, which has no first "
              "element to index: read it with .item(). Code indexing it comes from tutorials written for torch 0.3. "
              "Reading .item() each step makes the CPU wait for the GPU: accumulate on the device and read at "
              "log points (chapter 5).",
        expect="IndexError",
        params=({"read": "loss.data[0]", "fixed": "loss.item()"},
                {"read": "(model.weight > 0).sum()[0]", "fixed": "(model.weight > 0).sum().item()"}),
        sources=("https://github.com/higgsfield/np-hard-deep-reinforcement-learning/issues/5",
                 "https://github.com/foolwood/pytorch-slimming/issues/12",
                 "https://github.com/Sundrops/video-caption.pytorch/issues/5",
                 "https://github.com/xbresson/spectral_graph_convnets/issues/6"),
        wordings=("invalid index of a 0-dim tensor. Use tensor.item() to convert a 0-dim tensor to a Python number",),
    ),
)
