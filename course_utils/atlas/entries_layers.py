"""The atlas's entries for layers' inputs in the step (chapters 3 and 5): channels, views, embeddings, an
LSTM's hidden state."""
from __future__ import annotations

from course_utils.atlas.entry import Entry

ENTRIES = (
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
        id="conv-input-dims", stage="step", chapter=3,
        title="a batch with too few or too many dimensions for a convolution (one H x W image, a stack unsqueezed "
              "once too often)",
        code="torch.manual_seed(0)\n"
             "conv = nn.Conv$d($ch, 8, 3)\n"
             "x = $batch\n"
             "out = conv(x)",
        fix="torch.manual_seed(0)\n"
            "conv = nn.Conv$d($ch, 8, 3)\n"
            "x = $batch\n"
            "out = conv(x$fixed)\n"
            "shown = tuple(out.shape)",
        cause="A convolution takes (N, C, ...) or, for one example, (C, ...): Conv2d 4 or 3 dimensions, Conv1d 3 or "
              "2. A grayscale image read as (H, W) lacks its channel (and batch) dimension; a batch stacked and then "
              "unsqueezed, or a video's frames kept as their own dimension, has one too many. Print x.shape before "
              "the model and add (x[None], unsqueeze) or fold away (squeeze, flatten(0, 1)) the dimension that "
              "differs. Older torch wanted the batch dimension even for one example (\"Expected 4-dimensional "
              "input for 4-dimensional weight\").",
        expect="RuntimeError",
        params=({"d": "2d", "ch": 1, "batch": "torch.randn(28, 28)                 # one grayscale image, (H, W)",
                 "fixed": "[None, None]"},
                {"d": "2d", "ch": 3, "batch": "torch.randn(4, 3, 32, 32).unsqueeze(0)   # a batch unsqueezed again",
                 "fixed": ".squeeze(0)"},
                {"d": "1d", "ch": 6, "batch": "torch.randn(8, 6, 1, 12)            # (N, C, 1, L) from a 2-D reshape",
                 "fixed": ".flatten(2)"}),
        sources=("https://github.com/long123524/SEANet_torch/issues/4",
                 "https://github.com/CGCL-codes/AdvCLIP/issues/3",
                 "https://github.com/leizhang-geo/ST-CausalConvNet/issues/1",
                 "https://github.com/VisionRush/DeepFakeDefenders/issues/30",
                 "https://github.com/valerystrizh/pytorch-histogram-loss/issues/13",
                 "https://github.com/facebookresearch/ConvNeXt/issues/140"),
        wordings=("Expected 4-dimensional input for 4-dimensional weight [64, 3, 7, 7], but got 3-dimensional input of "
                  "size [3, 224, 224] instead",
                  "Expected 4-dimensional input for 4-dimensional weight [96, 3, 4, 4], but got 5-dimensional input of "
                  "size [2, 16, 3, 448, 448] instead"),
    ),
    Entry(
        id="batchnorm-input-dims", stage="step", chapter=3,
        title="a BatchNorm for other data than it gets (BatchNorm2d after a flatten or on video, BatchNorm1d on "
              "feature maps)",
        code="bn = nn.$cls($features)\n"
             "x = $batch\n"
             "out = bn(x)",
        fix="bn = nn.$good($features)     # the BatchNorm for the input's dimensions\n"
            "x = $batch\n"
            "out = bn(x)\n"
            "shown = tuple(out.shape)",
        cause="Each BatchNorm checks its input's dimensions: BatchNorm1d takes (N, C) or (N, C, L), BatchNorm2d "
              "(N, C, H, W), BatchNorm3d (N, C, D, H, W). The number in the name counts the data's own dimensions, "
              "not the input's. Use the one that fits where the layer sits (after a flatten, BatchNorm1d), or "
              "reshape the input.",
        expect="ValueError",
        params=({"cls": "BatchNorm2d", "features": 64, "good": "BatchNorm1d",
                 "batch": "torch.randn(8, 64)               # features after flatten(): (N, C)"},
                {"cls": "BatchNorm2d", "features": 3, "good": "BatchNorm3d",
                 "batch": "torch.randn(2, 3, 4, 16, 16)     # video clips: (N, C, T, H, W)"},
                {"cls": "BatchNorm1d", "features": 16, "good": "BatchNorm2d",
                 "batch": "torch.randn(8, 16, 5, 5)         # feature maps: (N, C, H, W)"}),
        sources=("https://github.com/pytorch/pytorch/issues/6316",
                 "https://github.com/rcdaudt/patch_based_change_detection/issues/1",
                 "https://github.com/kenshohara/3D-ResNets-PyTorch/issues/92",
                 "https://github.com/keras-team/autokeras/issues/475"),
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
        id="embedding-float-ids", stage="step", chapter=3,
        title="token ids passed to an Embedding as floats (a float array, torch.Tensor(list), a float column)",
        code="torch.manual_seed(0)\n"
             "emb = nn.Embedding(10, 8)\n"
             "ids = torch.tensor([[1, 2, 3], [4, 5, 6]], dtype=torch.$dtype)   # ids read into a float array\n"
             "out = emb(ids)",
        fix="torch.manual_seed(0)\n"
            "emb = nn.Embedding(10, 8)\n"
            "ids = torch.tensor([[1, 2, 3], [4, 5, 6]], dtype=torch.$dtype).long()   # ids are integers\n"
            "out = emb(ids)\n"
            "shown = tuple(out.shape)",
        cause="An Embedding looks rows up by index, so its input must be an integer tensor (int64 or int32); "
              "ids that went through a float NumPy array, torch.Tensor([...]) (always float32) or a model's "
              "float output arrive as floats. Older torch accepted only int64 ('to have scalar type Long; but got "
              "torch.IntTensor').",
        expect="RuntimeError",
        params=({"dtype": "float32"}, {"dtype": "float16"}),
        sources=("https://github.com/pytorch/pytorch/issues/116598",
                 "https://github.com/AIFSH/CosyVoice-ComfyUI/issues/70",
                 "https://github.com/orcax/PGPR/issues/8"),
        wordings=("Expected tensor for argument #1 'indices' to have scalar type Long; but got torch.IntTensor "
                  "instead (while checking arguments for embedding)",),
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
        id="rnn-input-size", stage="step", chapter=5,
        title="an LSTM (or GRU) built for another feature width than its input's",
        code="torch.manual_seed(0)\n"
             "rnn = nn.$cls(input_size=$built, hidden_size=16, batch_first=True)\n"
             "x = torch.randn(4, 7, $width)        # (batch, time, features): the features from another encoder\n"
             "out, _ = rnn(x)",
        fix="torch.manual_seed(0)\n"
            "x = torch.randn(4, 7, $width)\n"
            "rnn = nn.$cls(input_size=x.shape[-1], hidden_size=16, batch_first=True)   # the last dimension\n"
            "out, _ = rnn(x)\n"
            "shown = tuple(out.shape)",
        cause="A recurrent layer checks that the input's last dimension equals the input_size it was built with; "
              "batch_first only swaps batch and time, never the features. The features come from an embedding or "
              "encoder of another width (300-d vectors for a 100-d layer, a 768-d BERT for 1024): build the layer "
              "with input_size = the width that arrives, or project to it with an nn.Linear.",
        expect="RuntimeError",
        params=({"cls": "LSTM", "built": 300, "width": 100}, {"cls": "GRU", "built": 64, "width": 80}),
        sources=("https://github.com/xiaojunxu/SQLNet/issues/59",
                 "https://github.com/RaleLee/DialogueGCN/issues/5",
                 "https://github.com/uoe-agents/LIAM/issues/3",
                 "https://github.com/ljynlp/W2NER/issues/23"),
    ),
    Entry(
        id="rnn-hidden-other-device", stage="step", chapter=5,
        title="an LSTM's (or GRU's) initial hidden state made on the CPU while the model and the batch are on the GPU",
        code="torch.manual_seed(0)\n"
             "lstm = nn.LSTM(3, 4, batch_first=True).to(\"meta\")       # meta stands in for \"cuda\": no GPU here\n"
             "x = torch.randn($batch, 5, 3, device=\"meta\")\n"
             "h0 = (torch.zeros(1, $batch, 4), torch.zeros(1, $batch, 4))   # made on the default device, the CPU\n"
             "out, _ = lstm(x, h0)",
        fix="torch.manual_seed(0)\n"
            "lstm = nn.LSTM(3, 4, batch_first=True).to(\"meta\")\n"
            "x = torch.randn($batch, 5, 3, device=\"meta\")\n"
            "h0 = (torch.zeros(1, $batch, 4, device=x.device), torch.zeros(1, $batch, 4, device=x.device))\n"
            "out, _ = lstm(x, h0)\n"
            "shown = tuple(out.shape)",
        cause="model.to(device) moves the weights, but a hidden state built inside forward() or the loop with "
              "torch.zeros(...) lands on the default device, the CPU. Make it where the input is "
              "(device=x.device, or x.new_zeros(...)), or leave it out: the layer starts from zeros itself. Here a "
              "meta tensor stands in for the GPU: the same check, the same words with 'meta' for 'cuda:0'.",
        expect="RuntimeError",
        params=({"batch": 2}, {"batch": 8}),
        sources=("https://github.com/Lightning-AI/pytorch-lightning/issues/3738",
                 "https://github.com/taishan1994/pytorch_triple_extraction/issues/8",
                 "https://github.com/talipucar/CPC/issues/1"),
    ),
)
