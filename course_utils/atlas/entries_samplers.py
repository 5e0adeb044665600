"""The atlas's entries for samplers and splits (chapter 2): sampler with shuffle, batch_sampler's exclusive
arguments, random_split's lengths, WeightedRandomSampler's weights and replacement, shuffling with the GPU as the
default device.
"""
from __future__ import annotations

from course_utils.atlas.entry import Entry, source

ENTRIES = (
    Entry(
        id="sampler-with-shuffle", stage="data", chapter=2,
        title="a sampler (WeightedRandomSampler, DistributedSampler) and shuffle=True given together",
        code=source("""
            from torch.utils.data.distributed import DistributedSampler

            ds = TensorDataset(torch.randn(16, 4), torch.randint(0, 2, (16,)))
            sampler = $sampler
            loader = DataLoader(ds, batch_size=4, sampler=sampler, shuffle=True)
        """),
        fix=source("""
            from torch.utils.data.distributed import DistributedSampler

            ds = TensorDataset(torch.randn(16, 4), torch.randint(0, 2, (16,)))
            sampler = $sampler
            loader = DataLoader(ds, batch_size=4, sampler=sampler)
            shown = len(loader)
        """),
        cause="shuffle=True means 'use a RandomSampler', so it cannot be combined with a sampler of your own, "
              "which already decides the order. Drop shuffle; the sampler shuffles (a DistributedSampler "
              "with its own shuffle=True and set_epoch each epoch).",
        expect="ValueError",
        params=({"sampler": "WeightedRandomSampler(torch.ones(16), num_samples=16)"},
                {"sampler": "DistributedSampler(ds, num_replicas=2, rank=0)"}),
        sources=("https://github.com/wohlert/semi-supervised-pytorch/issues/12",),
    ),
    Entry(
        id="batch-sampler-exclusive", stage="data", chapter=2,
        title="a batch_sampler given together with batch_size, shuffle, sampler or drop_last",
        code=source("""
            from torch.utils.data import BatchSampler, RandomSampler

            ds = TensorDataset(torch.randn(10, 4))
            batches = BatchSampler(RandomSampler(ds), batch_size=$bs, drop_last=False)
            loader = DataLoader(ds, batch_sampler=batches, $extra)
        """),
        fix=source("""
            from torch.utils.data import BatchSampler, RandomSampler

            ds = TensorDataset(torch.randn(10, 4))
            batches = BatchSampler(RandomSampler(ds), batch_size=$bs, drop_last=False)
            loader = DataLoader(ds, batch_sampler=batches)
            shown = len(loader)
        """),
        cause="A batch_sampler yields whole batches of indices, so it alone decides batch size, order and "
              "what happens to the last batch; the DataLoader rejects batch_size, shuffle, sampler and "
              "drop_last next to it. Set those on the batch sampler instead.",
        expect="ValueError",
        params=({"bs": 4, "extra": "batch_size=4"}, {"bs": 3, "extra": "drop_last=True"}),
        sources=("https://github.com/meta-pytorch/opacus/issues/352",
                 "https://github.com/catalyst-team/catalyst/pull/271"),
    ),
    Entry(
        id="random-split-lengths", stage="data", chapter=2,
        title="random_split given lengths rounded down from fractions, which no longer add up",
        code=source("""
            ds = TensorDataset(torch.randn($n, 2))
            lengths = [int(f * len(ds)) for f in ($fractions)]
            parts = random_split(ds, lengths, generator=torch.Generator().manual_seed(0))
        """),
        fix=source("""
            ds = TensorDataset(torch.randn($n, 2))
            lengths = [int(f * len(ds)) for f in ($fractions)]
            lengths[-1] = len(ds) - sum(lengths[:-1])
            parts = random_split(ds, lengths, generator=torch.Generator().manual_seed(0))
            shown = tuple(len(p) for p in parts)
        """),
        cause="With whole numbers, random_split needs lengths that add up exactly to len(dataset); int() "
              "rounds each part down and loses samples. Give the last part the remainder, or pass the "
              "fractions themselves (summing to 1), which random_split rounds for you.",
        expect="ValueError",
        params=({"n": 1001, "fractions": "0.8, 0.2"}, {"n": 97, "fractions": "0.7, 0.15, 0.15"}),
        sources=("https://github.com/HUST-NingKang-Lab/MGM/issues/2",
                 "https://github.com/BraTS-inpainting/2023_challenge/issues/1",
                 "https://github.com/metatensor/metatrain/issues/290"),
    ),
    Entry(
        id="weighted-sampler-zero-weights", stage="data", chapter=2,
        title="WeightedRandomSampler whose weights are all zero (class weights from integer division)",
        code=source("""
            labels = torch.tensor([$labels])
            counts = torch.bincount(labels)
            weights = 1 // counts[labels]  # integer division: every weight becomes 0
            sampler = WeightedRandomSampler(weights, num_samples=len(labels))
            indices = list(sampler)
        """),
        fix=source("""
            labels = torch.tensor([$labels])
            counts = torch.bincount(labels)
            weights = 1.0 / counts[labels]
            sampler = WeightedRandomSampler(weights, num_samples=len(labels))
            indices = list(sampler)
            shown = len(indices)
        """),
        cause="The sampler draws with torch.multinomial, which needs non-negative weights with a positive "
              "sum; all zeros (here 1 // count on integers, elsewhere a class-weight lookup that missed) "
              "leaves nothing to draw. The error comes when the sampler is iterated, not when it is built.",
        expect="RuntimeError",
        params=({"labels": "0, 0, 0, 1, 1"}, {"labels": "0, 1, 2, 0, 1, 2, 2, 2"}),
        sources=("https://github.com/salesforce/ALBEF/issues/18",
                 "https://github.com/salesforce/ALBEF/issues/131"),
    ),
    Entry(
        id="weighted-sampler-without-replacement", stage="data", chapter=2,
        title="WeightedRandomSampler asked for more samples than there are weights with replacement=False",
        code=source("""
            weights = torch.ones($n)
            sampler = WeightedRandomSampler(weights, num_samples=$draws, replacement=False)
            indices = list(sampler)
        """),
        fix=source("""
            weights = torch.ones($n)
            sampler = WeightedRandomSampler(weights, num_samples=$draws, replacement=True)
            indices = list(sampler)
            shown = len(indices)
        """),
        cause="Without replacement each index can be drawn once, so num_samples cannot exceed the number of "
              "weights; oversampling a minority class needs replacement=True (the default).",
        expect="RuntimeError",
        params=({"n": 10, "draws": 20}, {"n": 3, "draws": 4}),
        sources=("https://github.com/speechbrain/speechbrain/issues/1786",),
    ),
    Entry(
        id="default-device-generator", stage="data", chapter=2,
        title="DataLoader(shuffle=True) after making the GPU the default device (torch.set_default_device('cuda'), "
              "torch.set_default_tensor_type(torch.cuda.FloatTensor))",
        code=source("""
            torch.set_default_device("cuda")   # every new tensor on the GPU, the sampler's shuffled order too
            ds = TensorDataset(torch.arange(10.0))
            loader = DataLoader(ds, batch_size=4, shuffle=True)
            for (xb,) in loader:   # RandomSampler draws randperm on the GPU with its CPU generator
                pass
        """),
        fix=source("""
            torch.set_default_device("cuda")
            ds = TensorDataset(torch.arange(10.0))
            loader = DataLoader(ds, batch_size=4, shuffle=True, generator=torch.Generator(device="cuda"))
            for (xb,) in loader:
                pass
        """),
        cause="RandomSampler shuffles with torch.randperm and a generator it makes on the CPU; with the GPU as the "
              "default device randperm runs on the GPU, which needs a CUDA generator. Keep the CPU as the default "
              "device and move each batch (xb.to(device)): that is what the loop does anyway. Or give the "
              "DataLoader a generator on the default device.",
        expect="RuntimeError",
        not_run="needs a CUDA GPU, which this machine lacks (torch's text, from ATen's check_generator)",
        message="Expected a 'cuda' device type for generator but found 'cpu'",
        sources=("https://github.com/amdegroot/ssd.pytorch/issues/578",
                 "https://github.com/dbolya/yolact/issues/664",
                 "https://github.com/dbolya/yolact/issues/727",
                 "https://github.com/pyro-ppl/pyro/pull/3264",
                 "https://github.com/pytorch/pytorch/issues/6874"),
        wordings=("randperm is only implemented for CPU",),   # torch 0.4, the same set-up (pytorch#6874)
    ),
    Entry(
        id="weighted-sampler-too-many-categories", stage="data", chapter=2,
        title="a WeightedRandomSampler (or torch.multinomial) over more than 2**24 examples",
        code="weights = torch.ones(2**24 + $extra)                   # one weight per example: a very large dataset\n"
             "sampler = WeightedRandomSampler(weights, num_samples=10, replacement=$replacement)\n"
             "drawn = list(sampler)                                  # the draw happens when the sampler is iterated",
        fix="weights = torch.ones(2**24 + $extra)\n"
            "g = torch.Generator().manual_seed(0)\n"
            "# draw the example in two steps, each over fewer than 2**24 categories: a chunk, then a row in it\n"
            "chunks = weights.split(2**23)\n"
            "chunk = torch.multinomial(torch.stack([c.sum() for c in chunks]), 10, replacement=True, generator=g)\n"
            "rows = torch.empty(len(chunk), dtype=torch.long)     # each draw's row, in the order of the draws\n"
            "for c in chunk.unique().tolist():                    # one call per chunk drawn, not one per row\n"
            "    at = (chunk == c).nonzero().squeeze(1)\n"
            "    rows[at] = torch.multinomial(chunks[c], len(at), replacement=True, generator=g) + c * 2**23\n"
            "shown = len(rows)",
        fix_line="chunk = torch.multinomial(torch.stack([c.sum() for c in chunks]), 10, replacement=True, generator=g)",
        cause="WeightedRandomSampler draws with torch.multinomial, which refuses more than 2**24 (16,777,216) "
              "categories, so a sampler over that many examples fails when it is iterated (the DataLoader's first "
              "batch), not when it is built. Draw in two steps (a chunk by its total weight, then an example in it), "
              "weight classes instead of examples, or sample from a subset.",
        expect="RuntimeError",
        params=({"extra": 1, "replacement": True}, {"extra": 1000, "replacement": False}),
        sources=("https://github.com/pasqal-io/emulators/issues/137", "https://github.com/sbi-dev/sbi/issues/1283"),
    ),
)
