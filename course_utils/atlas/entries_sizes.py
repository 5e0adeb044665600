"""The atlas's entries for sizes that stop fitting inside a model (chapter 3): images too small for the network's
downsampling, a U-Net skip connection on an odd size, and token logits with the classes last for cross_entropy.
Each is the same mistake seen from the layer that fails: the shape a layer gets is not the one it was built for.
"""
from __future__ import annotations

from course_utils.atlas.entry import Entry

# The downsampling half of a CNN (four or five stride-2 stages), reduced to what sets the size: the poolings
_STAGES = "stages = nn.Sequential(*[nn.MaxPool2d(2) for _ in range($pools)])   # each halves the height and width\n"

ENTRIES = (
    Entry(
        id="conv-kernel-larger-than-input", stage="step", chapter=3,
        title="images smaller than the network was designed for (32 x 32 or 28 x 28 into a CNN built for 224 x 224): "
              "a convolution meets a map smaller than its kernel",
        code="torch.manual_seed(0)\n" + _STAGES +
             "conv = nn.Conv2d(4, 4, 3)                            # a 3 x 3 convolution without padding\n"
             "x = torch.randn(2, 4, $size, $size)                  # the images of a small dataset\n"
             "out = conv(stages(x))",
        fix="torch.manual_seed(0)\n" + _STAGES +
            "conv = nn.Conv2d(4, 4, 3)\n"
            "x = torch.randn(2, 4, $size, $size)\n"
            "x = F.interpolate(x, size=$design)                  # resized to what the network was built for\n"
            "out = conv(stages(x))\n"
            "shown = tuple(out.shape)",
        cause="Every stride-2 stage halves the feature map, so a network built for large images shrinks a small "
              "one to 2 x 2 or 1 x 1 before its last layers, and a kernel cannot be larger than the (padded) map "
              "it slides over. Resize the images to the size the network expects (transforms.Resize), or remove "
              "downsampling stages (fewer poolings, stride 1 in the first layers, as CIFAR versions of ResNet do).",
        expect="RuntimeError",
        params=({"pools": 4, "size": 32, "design": 64}, {"pools": 4, "size": 28, "design": 64}),
        sources=("https://github.com/tamarott/SinGAN/issues/28",
                 "https://github.com/avalonstrel/GatedConvolution_pytorch/issues/31",
                 "https://github.com/kijai/ComfyUI-Marigold/issues/34"),
    ),
    Entry(
        id="pool-output-too-small", stage="step", chapter=3,
        title="images smaller than the network was designed for: a pooling layer meets a map smaller than its window",
        code="torch.manual_seed(0)\n" + _STAGES +
             "x = torch.randn(2, $channels, $size, $size)           # CIFAR or MNIST into an ImageNet network\n"
             "out = stages(x)",
        fix="torch.manual_seed(0)\n" + _STAGES +
            "x = torch.randn(2, $channels, $size, $size)\n"
            "x = F.interpolate(x, size=$design)                   # resized to what the network was built for\n"
            "out = stages(x)\n"
            "shown = tuple(out.shape)",
        cause="Each pooling (or strided) stage halves the map; after enough of them a small image is 1 x 1 and the "
              "next pooling window does not fit (output size 0), as when an ImageNet model's final average pool "
              "meets 32 x 32 CIFAR images. Resize the images to the network's input size, or use a version of the "
              "network built for small images (fewer poolings, nn.AdaptiveAvgPool2d(1) instead of a fixed "
              "window).",
        expect="RuntimeError",
        params=({"pools": 5, "channels": 8, "size": 16, "design": 32},
                {"pools": 6, "channels": 64, "size": 28, "design": 64}),
        sources=("https://github.com/liuzechun/MetaPruning/issues/22",
                 "https://github.com/pppLang/SKNet/issues/15",
                 "https://github.com/milesial/Pytorch-UNet/issues/134",
                 "https://github.com/VITA-Group/Orthogonality-in-CNNs/issues/5"),
        wordings=("Given input size: (512x1x1). Calculated output size: (512x-5x-5). Output size is too small at "
                  "/pytorch/aten/src/THNN/generic/SpatialAveragePooling.c:48",),   # Orthogonality-in-CNNs#5
    ),
    Entry(
        id="cat-skip-sizes-differ", stage="step", chapter=3,
        title="a U-Net's skip connection on an image whose size is not a multiple of 2 ** depth: torch.cat of maps "
              "one pixel apart",
        code="torch.manual_seed(0)\n"
             "down = nn.Conv2d(3, 8, 3, stride=2, padding=1)     # the encoder halves the size (rounding up)\n"
             "up = nn.ConvTranspose2d(8, 8, 2, stride=2)          # the decoder doubles it\n"
             "x = torch.randn(1, 3, $size, $size)                 # an odd size\n"
             "merged = torch.cat([up(down(x)), x], dim=1)        # the skip connection",
        fix="torch.manual_seed(0)\n"
            "down = nn.Conv2d(3, 8, 3, stride=2, padding=1)\n"
            "up = nn.ConvTranspose2d(8, 8, 2, stride=2)\n"
            "x = torch.randn(1, 3, $size, $size)\n"
            "decoded = F.interpolate(up(down(x)), size=x.shape[-2:])   # back to the skip's exact size\n"
            "merged = torch.cat([decoded, x], dim=1)\n"
            "shown = tuple(merged.shape)",
        cause="torch.cat joins maps along the channels only if every other dimension matches. A stride-2 layer "
              "rounds an odd size, so after going down and up an image whose side is not a multiple of 2 ** depth "
              "comes back a pixel larger or smaller than the skip it is joined to. Resize or pad the images to a "
              "multiple of 2 ** depth (32 for five stages), or resize (or pad, as the original U-Net crops) the "
              "decoder's map to the skip's size before the cat.",
        expect="RuntimeError",
        params=({"size": 65}, {"size": 31}),
        sources=("https://github.com/bigmb/Unet-Segmentation-Pytorch-Nest-of-Unets/issues/55",
                 "https://github.com/nikhilroxtomar/Retina-Blood-Vessel-Segmentation-in-PyTorch/issues/2",
                 "https://github.com/NJU-LHRS/Official_Remote_Sensing_Mamba/issues/12",
                 "https://github.com/megvii-model/HINet/issues/19"),
        wordings=("torch.cat(): Sizes of tensors must match except in dimension 1. Got 10 and 11 in dimension 2 "
                  "(The offending index is 1)",),   # HINet#19, torch 1.7-1.8
    ),
    Entry(
        id="cross-entropy-classes-last", stage="step", chapter=3,
        title="token logits (N, T, C) and targets (N, T) passed to cross_entropy as they are (a language model, a "
              "tagger, captioning)",
        code="torch.manual_seed(0)\n"
             "logits = nn.Linear(16, $vocab)(torch.randn($batch, $steps, 16))   # (N, T, C): classes last\n"
             "targets = torch.randint(0, $vocab, ($batch, $steps))            # (N, T)\n"
             "loss = F.cross_entropy(logits, targets)",
        fix="torch.manual_seed(0)\n"
            "logits = nn.Linear(16, $vocab)(torch.randn($batch, $steps, 16))\n"
            "targets = torch.randint(0, $vocab, ($batch, $steps))\n"
            "loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())   # (N*T, C) against (N*T,)\n"
            "same = F.cross_entropy(logits.transpose(1, 2), targets)           # or the classes second: (N, C, T)\n"
            "square, cut = logits[:, :$vocab], targets[:, :$vocab]             # T = C: as many steps as classes\n"
            "silent = F.cross_entropy(square, cut)                             # no error: the steps read as classes\n"
            "right = F.cross_entropy(square.flatten(0, 1), cut.flatten())\n"
            "shown = [bool(torch.allclose(loss, same)), bool(torch.allclose(silent, right))]",
        cause="cross_entropy reads the classes from dimension 1: (N, C) or (N, C, d1, ...). Token logits come out of "
              "a model as (N, T, C), so it takes T for the classes and expects targets of shape (N, C). Flatten both "
              "(logits.view(-1, C), targets.view(-1)) or move the classes to dimension 1 (transpose(1, 2)). When T "
              "happens to equal C nothing is raised and the loss is computed over the wrong dimension.",
        expect="RuntimeError",
        params=({"vocab": 10, "batch": 4, "steps": 12}, {"vocab": 6, "batch": 8, "steps": 9}),
        sources=("https://github.com/sgrvinod/a-PyTorch-Tutorial-to-Image-Captioning/issues/195",
                 "https://github.com/morganmcg1/fasthugs/issues/7",
                 "https://github.com/huggingface/transformers/issues/55"),
        wordings=("Expected target size (12, 50265), got torch.Size([12, 510])",   # fasthugs#7, before torch 1.10
                  "Expected target size (1, 30522), got torch.Size([1, 11])"),     # transformers#55
    ),
)
