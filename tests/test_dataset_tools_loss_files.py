"""The mechanism-map demonstrations of chapters 1-3 (issue 43): dataset tools, rarer loader and sampler knobs,
LinearCrossEntropyLoss, TripletMarginLoss, the legacy loss flags, save/load options and the seeding calls."""
import torch

from course_utils.chapters.ch01_dataset_tools import composition_rules, loader_knobs, sampler_knobs
from course_utils.chapters.ch03_loss_files import (file_and_seed_rules, legacy_loss_flags,
                                                   linear_cross_entropy_rules, triplet_rules)


def test_composition_rules_leave_the_global_generator_alone():
    before = torch.get_rng_state()
    r = composition_rules()
    assert torch.equal(before, torch.get_rng_state())
    assert r["random_split(10, [0.33, 0.33, 0.34]): lengths"] == [4, 3, 3]
    without = r["random_split without generator, validation indices; then with one random draw before it"]
    assert without[0] != without[1]
    seeded = r["the same with generator=torch.Generator().manual_seed(0)"]
    assert seeded[0] == seeded[1]
    assert r["Subset(ds, [1, 3, 5]).tensors"].startswith("AttributeError")
    assert r["ChainDataset([stream of 2, stream of 3])"] == [0, 1, 0, 1, 2]
    assert r["StackDataset of 10 and 9 examples"] == "ValueError: Size mismatch between datasets"
    before, after = r["val.transform = f on the Subset: the val loader's batch, before and after"]
    assert before == after                              # an attribute of the Subset is never read
    negated, train_first = r["val.dataset.transform = f (f: x -> -x): the val batch, and train's first item too"]
    assert negated == [-v for v in before] and train_first < 0          # the wrapped dataset's: both splits
    plain, _ = r["Subset(a second dataset object, val.indices): the val batch, train's first item"]
    assert plain == before


def test_loader_and_sampler_knobs():
    r = loader_knobs()
    assert r["DataLoader(num_workers=0, prefetch_factor=4)"].startswith("ValueError: prefetch_factor")
    assert r["in_order=False, worker 0's first batch slow: first batch out"] == [2, 3]
    assert r["in_order=False: every batch arrives once, in dataset order"] == (True, False)
    s = sampler_knobs()
    first, second = s["SubsetRandomSampler([7, 8, 9]), two epochs"]
    assert sorted(first) == sorted(second) == [7, 8, 9] and first != second
    assert sum(s["RandomSampler(num_samples=25) without replacement: times each example comes"]) == 25
    assert s["len() of that loader"].startswith("TypeError")


def test_losses():
    r = linear_cross_entropy_rules()
    assert r["optimizer from model.parameters() only: the loss's weight changed by a step"] is False
    assert all(r["weight, ignore_index, label_smoothing, reduction sum/none: = CrossEntropyLoss on its logits"])
    assert r["options=LinearCrossEntropyOptions() (chunked): = the reference"]
    assert "called twice" in r["chunked, a second backward with retain_graph=True"]
    assert r["chunked, allow_retain_graph=True: a second backward"] == "no error"
    assert r["chunked, reduction='none': a second backward"] == "no error"
    t = triplet_rules()
    assert t["p=1.0: d(a, positive), d(a, negative), loss"] == (7.0, 6.0, 2.0)
    assert t["p=2.0: d(a, positive), d(a, negative), loss"][2] == 0.0
    legacy = legacy_loss_flags()
    assert legacy["classes; size_average=False -> reduction, reduce=False -> reduction"] == (17, [("sum", "none")])
    assert legacy["MSELoss(size_average=False, reduction='mean').reduction"] == "sum"
    assert legacy["NLLLoss2d() = NLLLoss() on (N, C, H, W), bit for bit"]


def test_files_and_seeds_leave_the_global_generator_alone():
    before = torch.get_rng_state()
    r = file_and_seed_rules()
    assert torch.equal(before, torch.get_rng_state())
    assert r["save(pickle_protocol=4), load(weights_only=True)"] == "UnpicklingError: Unsupported operand 149"
    assert r["a file holding a class instance, load(pickle_module=pickle)"] == "loads a Note"
    assert r["a file holding a class instance, load(default)"].startswith("UnpicklingError")
    assert r["torch.seed(): initial_seed() is the seed it drew; a second call draws another"] == (True, True)
    assert r["manual_seed(5) then torch.cuda.manual_seed_all(0): CPU draws = manual_seed(0)'s"] is False


def test_every_function_leaves_the_global_generator_alone():
    for rules in (loader_knobs, sampler_knobs, linear_cross_entropy_rules, triplet_rules, legacy_loss_flags):
        before = torch.get_rng_state()
        rules()
        assert torch.equal(before, torch.get_rng_state()), rules.__name__
