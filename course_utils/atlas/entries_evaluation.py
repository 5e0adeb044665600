"""The atlas's entries for evaluation (stage "evaluation", chapter 4): no_grad, inference_mode, eval mode and
a batch of one, a tensor that still requires grad turned into NumPy, .item() of several values, the mean of
integers.
"""
from __future__ import annotations

from course_utils.atlas.entry import Entry, source

ENTRIES = (
    Entry(
        id="backward-under-no-grad", stage="evaluation", chapter=4,
        title="backward() on a loss computed inside torch.no_grad() or inference_mode() (evaluation code reused)",
        code=source("""
            model = nn.Linear(4, 1)
            x, y = torch.randn(8, 4), torch.randn(8, 1)
            with $guard:
                loss = F.mse_loss(model(x), y)
            loss.backward()
        """),
        fix=source("""
            model = nn.Linear(4, 1)
            x, y = torch.randn(8, 4), torch.randn(8, 1)
            loss = F.mse_loss(model(x), y)
            loss.backward()
            shown = tuple(model.weight.grad.shape)
        """),
        cause="Inside no_grad or inference_mode autograd records nothing, so the loss has no grad_fn and "
              "backward has no graph to walk. Compute training losses outside the evaluation context "
              "(the same message appears when every parameter was frozen with requires_grad_(False)).",
        expect="RuntimeError",
        params=({"guard": "torch.no_grad()"}, {"guard": "torch.inference_mode()"}),
        sources=("https://github.com/nianticlabs/monodepth2/issues/24",
                 "https://github.com/davidmascharka/tbd-nets/issues/8",
                 "https://github.com/weizheliu/People-Flows/issues/7"),
    ),
    Entry(
        id="inference-tensor-saved-for-backward", stage="evaluation", chapter=4,
        title="features computed once under torch.inference_mode() reused to train a head",
        code=source("""
            backbone, head = nn.Linear(8, $hidden), nn.Linear($hidden, 2)
            x, y = torch.randn(4, 8), torch.tensor([0, 1, 0, 1])
            with torch.inference_mode():
                features = backbone(x)  # cached, reused every epoch
            loss = F.cross_entropy(head(features), y)
            loss.backward()
        """),
        fix=source("""
            backbone, head = nn.Linear(8, $hidden), nn.Linear($hidden, 2)
            x, y = torch.randn(4, 8), torch.tensor([0, 1, 0, 1])
            with torch.no_grad():
                features = backbone(x)  # cached, reused every epoch
            loss = F.cross_entropy(head(features), y)
            loss.backward()
            shown = tuple(head.weight.grad.shape)
        """),
        cause="Tensors made under inference_mode are 'inference tensors' that autograd may never save; a "
              "layer that needs its input for the backward pass (Linear does) refuses them. Make such "
              "tensors under no_grad instead, or clone() them outside inference_mode.",
        expect="RuntimeError",
        params=({"hidden": 16}, {"hidden": 32}),
        sources=("https://github.com/facebookresearch/dinov2/issues/472",
                 "https://github.com/roboflow/rf-detr/issues/461"),
    ),
    Entry(
        id="inference-tensor-inplace-outside", stage="evaluation", chapter=4,
        fix_line='    test_loss /= len(loader)   # inside the inference_mode block (or test_loss = test_loss / len(loader))',
        title="a metric accumulated under torch.inference_mode() updated in place after the block",
        code=source("""
            model = nn.Linear(4, 3)
            ds = TensorDataset(torch.randn(12, 4), torch.randint(0, 3, (12,)))
            loader = DataLoader(ds, batch_size=$bs)
            with torch.inference_mode():
                test_loss = 0
                for xb, yb in loader:
                    test_loss += F.cross_entropy(model(xb), yb)
            $after
        """),
        fix=source("""
            model = nn.Linear(4, 3)
            ds = TensorDataset(torch.randn(12, 4), torch.randint(0, 3, (12,)))
            loader = DataLoader(ds, batch_size=$bs)
            with torch.inference_mode():
                test_loss = 0
                for xb, yb in loader:
                    test_loss += F.cross_entropy(model(xb), yb)
                $after
            shown = tuple(test_loss.shape)
        """),
        cause="The accumulated loss is an inference tensor, and outside inference_mode torch forbids in-place "
              "updates to it (/=, *=, add_). Finish the arithmetic inside the block (watch the "
              "indentation), or accumulate Python floats with .item().",
        expect="RuntimeError",
        params=({"bs": 4, "after": "test_loss /= len(loader)"}, {"bs": 6, "after": "test_loss.mul_(100)"}),
        sources=("https://github.com/mrdbourke/pytorch-deep-learning/issues/397",
                 "https://github.com/mantasu/glasses-detector/issues/19",
                 "https://github.com/vllm-project/vllm/issues/1968"),
    ),
    Entry(
        id="batchnorm-batch-of-one", stage="evaluation", chapter=4,
        title="predicting a single sample with a BatchNorm model still in train mode",
        code=source("""
            model = nn.Sequential($layers)
            pred = model(torch.randn($shape))  # one sample; model.eval() was never called
        """),
        fix=source("""
            model = nn.Sequential($layers)
            model.eval()
            with torch.no_grad():
                pred = model(torch.randn($shape))
            shown = tuple(pred.shape)
        """),
        cause="In train mode BatchNorm normalises with the batch's own mean and variance, which one value per "
              "channel cannot give. Call model.eval() for inference (it uses the running statistics); in "
              "training, avoid a last batch of one with drop_last=True.",
        expect="ValueError",
        params=({"layers": "nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2)", "shape": "1, 4"},
                {"layers": "nn.Conv2d(3, 16, 3), nn.AdaptiveAvgPool2d(1), nn.BatchNorm2d(16), nn.ReLU(), "
                           "nn.Flatten(), nn.Linear(16, 2)",
                 "shape": "1, 3, 8, 8"}),
        sources=("https://github.com/fungtion/DANN_py3/issues/8",
                 "https://github.com/luizgh/sigver/issues/10",
                 "https://github.com/open-mmlab/mmsegmentation/issues/272"),
    ),
    Entry(
        id="numpy-on-tensor-requiring-grad", stage="evaluation", chapter=4,
        title="model outputs turned into NumPy for a metric or a plot without detaching",
        code=source("""
            model = nn.Linear(4, $classes)
            probs = model(torch.randn(5, 4)).softmax(dim=1)
            $convert
        """),
        fix=source("""
            model = nn.Linear(4, $classes)
            with torch.no_grad():
                probs = model(torch.randn(5, 4)).softmax(dim=1)
            $convert
            shown = preds.shape
        """),
        cause="The outputs are part of the autograd graph (requires_grad=True), and NumPy memory cannot carry "
              "gradients, so torch refuses to hand it over silently. Evaluate under torch.no_grad(), or call "
              ".detach() (and .cpu()) before .numpy().",
        expect="RuntimeError",
        params=({"classes": 3, "convert": "preds = probs.numpy()"},
                {"classes": 2, "convert": "preds = np.asarray(probs)"}),
        sources=("https://github.com/pytorch/pytorch/issues/44023",
                 "https://github.com/zhuangdizhu/FedGen/issues/1",
                 "https://github.com/XiaMooo/Yolo-Detect-Layer-Visualization/issues/1"),
    ),
    Entry(
        id="numpy-of-gpu-tensor", stage="evaluation", chapter=4,
        title="outputs still on the GPU turned into NumPy for a metric or a plot",
        code=source("""
            # No GPU here: the meta device stands in for cuda:0 (a tensor with no memory on the CPU's side)
            probs = torch.zeros(5, $classes, device="meta")     # model(x).softmax(1) after model.to(device)
            preds = $convert
        """),
        fix=source("""
            with torch.no_grad():
                model = nn.Linear(4, $classes)
                probs = model(torch.randn(5, 4)).softmax(dim=1)
            preds = probs.cpu().numpy()          # copied to the host first (.detach() too, outside no_grad)
            shown = preds.shape
        """),
        cause="NumPy arrays live in the CPU's memory, and torch does not copy a GPU tensor behind your back. "
              "Call .cpu() (after .detach() when it requires grad) before .numpy(); on a GPU the message names "
              "the device: 'can't convert cuda:0 device type tensor to numpy'.",
        expect="TypeError",
        params=({"classes": 3, "convert": "probs.numpy()"}, {"classes": 2, "convert": "np.asarray(probs.argmax(1))"}),
        sources=("https://github.com/Zhongdao/Towards-Realtime-MOT/issues/257",
                 "https://github.com/wengong-jin/hgraph2graph/pull/35",
                 "https://github.com/iMoonLab/PVRNet/issues/3"),
        wordings=("can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host "
                  "memory first.",
                  "can't convert CUDA tensor to numpy. Use Tensor.cpu() to copy the tensor to host memory first."),
    ),
    Entry(
        id="dim-out-of-range", stage="evaluation", chapter=4,
        title="argmax or softmax over dim=1 of a 1-D tensor (one logit per example, squeezed)",
        code=source("""
            torch.manual_seed(0)
            model = nn.Linear(4, 1)                         # a binary classifier: one logit per example
            logits = model(torch.randn(8, 4)).squeeze(1)    # shape (8,): no class dimension
            preds = $read
        """),
        fix=source("""
            torch.manual_seed(0)
            model = nn.Linear(4, 1)
            logits = model(torch.randn(8, 4)).squeeze(1)
            preds = $fixed
            shown = tuple(preds.shape)
        """),
        cause="dim=1 names a dimension the tensor does not have: a 1-D tensor has only dim 0 (or -1). A model with "
              "one output per example, squeezed to shape (N,), has no class dimension to take an argmax or a "
              "softmax over: threshold the logit (> 0) or take its sigmoid. Labels that are already class indices "
              "are not one-hot: use them as they are, not max(y, 1). Print .shape just before the call.",
        expect="IndexError",
        params=({"read": "logits.argmax(dim=1)", "fixed": "(logits > 0).long()    # one logit: its sign is the class"},
                {"read": "torch.softmax(logits, dim=1)",
                 "fixed": "torch.sigmoid(logits)  # one logit: its sigmoid is the probability"}),
        sources=("https://github.com/pytorch/tutorials/issues/2122",
                 "https://github.com/ishaqadenali/SVRG-Pytorch/issues/1",
                 "https://github.com/Joyako/SphereFace-pytorch/issues/3",
                 "https://github.com/fxia22/kdnet.pytorch/issues/3"),
        wordings=("dimension out of range (expected to be in range of [-1, 0], but got 1)",),
    ),
    Entry(
        id="index-a-column-of-1d", stage="evaluation", chapter=4,
        title="a column taken from a 1-D tensor: probs[:, 1] of a binary model whose one logit was squeezed, "
              "labels[:, 0] of labels already of shape (N,)",
        code="torch.manual_seed(0)\n"
             "logits = nn.Linear(4, 1)(torch.randn($batch, 4)).squeeze(1)   # one logit per example: shape (N,)\n"
             "probs = torch.sigmoid(logits)\n"
             "positive = probs$index                        # the column of class 1, as for two logits",
        fix="torch.manual_seed(0)\n"
            "logits = nn.Linear(4, 1)(torch.randn($batch, 4)).squeeze(1)\n"
            "probs = torch.sigmoid(logits)\n"
            "positive = probs                              # one sigmoid output is already P(class 1)\n"
            "shown = tuple(positive.shape)",
        cause="The tensor has one dimension, so it takes one index: a binary model with a single logit gives "
              "P(class 1) directly (no column to pick), and labels of shape (N,) have no column 0. Check the shape "
              "where it was made (.squeeze(), a one-logit head, a metric's output) before indexing it.",
        expect="IndexError",
        params=({"batch": 8, "index": "[:, 1]"}, {"batch": 5, "index": "[:, 0]"}),
        sources=("https://github.com/shenweichen/DeepCTR-Torch/issues/263",
                 "https://github.com/leeyegy/SimCC/issues/4",
                 "https://github.com/wushuang01/Focal_loss_for_object_detection/issues/2",
                 "https://github.com/Sharpiless/Yolov5-Deepsort/issues/15"),
    ),
    Entry(
        id="item-of-several-values", stage="evaluation", chapter=4,
        title=".item() on a tensor of several values: a per-example loss (reduction='none'), a batch of correct "
              "flags before .sum()",
        code="torch.manual_seed(0)\n"
             "logits, labels = torch.randn($batch, 3), torch.randint(0, 3, ($batch,))\n"
             "value = $many.item()                 # one number per example",
        fix="torch.manual_seed(0)\n"
            "logits, labels = torch.randn($batch, 3), torch.randint(0, 3, ($batch,))\n"
            "value = $many.$reduce().item()       # reduced to one number first\n"
            "shown = type(value).__name__",
        cause=".item() (and float(), int()) turn a tensor of exactly one value into a Python number. A loss built "
              "with reduction='none', or a comparison of predictions and labels, holds one value per example: "
              "reduce it first (.mean(), .sum()). Under nn.DataParallel a model that returns its loss gives one "
              "per GPU: take its .mean(). Older torch worded it 'only one element tensors can be converted to Python "
              "scalars', which float() of such a tensor still raises.",
        expect="RuntimeError",
        params=({"batch": 4, "many": "F.cross_entropy(logits, labels, reduction='none')", "reduce": "mean"},
                {"batch": 8, "many": "(logits.argmax(1) == labels)", "reduce": "sum"}),
        sources=("https://github.com/zhaozhengChen/ReCAM/issues/4",
                 "https://github.com/cshizhe/vil3dref/issues/5",
                 "https://github.com/zhen-he/tracking-by-animation/issues/17"),
        wordings=("only one element tensors can be converted to Python scalars",),   # float(); .item() before 2.x
    ),
    Entry(
        id="mean-of-integers", stage="evaluation", chapter=4,
        title="an accuracy taken as the mean of an integer tensor (correct flags as long, a list of counts)",
        code="torch.manual_seed(0)\n"
             "logits, labels = torch.randn($batch, 3), torch.randint(0, 3, ($batch,))\n"
             "accuracy = $correct.mean()          # integers: mean() will not guess a dtype",
        fix="torch.manual_seed(0)\n"
            "logits, labels = torch.randn($batch, 3), torch.randint(0, 3, ($batch,))\n"
            "accuracy = $fixed.mean()  # a float tensor first\n"
            "shown = str(accuracy.dtype)",
        cause="mean() of an integer (or bool) tensor has no integer answer, and torch will not pick a float dtype "
              "for you. Convert first: (pred == y).float().mean(), or count with .sum() and divide by the number "
              "of examples (chapter 4: weight by examples, not by batches).",
        expect="RuntimeError",
        params=({"batch": 6, "correct": "(logits.argmax(1) == labels).long()",
                 "fixed": "(logits.argmax(1) == labels).float()"},
                {"batch": 10, "correct": "torch.tensor([int(p == y) for p, y in zip(logits.argmax(1), labels)])",
                 "fixed": "torch.tensor([float(p == y) for p, y in zip(logits.argmax(1), labels)])"}),
        sources=("https://github.com/pyg-team/pytorch_geometric/pull/7735",
                 "https://github.com/microsoft/mup/pull/33",
                 "https://github.com/pytorch/pytorch/issues/94909",
                 "https://github.com/pytorch/pytorch/issues/64897",
                 "https://github.com/open-mmlab/mmpose/issues/2138"),
        wordings=("Can only calculate the mean of floating types. Got Long instead.",          # pytorch#64897
                  "mean(): input dtype should be either floating point or complex dtypes. Got Long instead."),
    ),
)
