"""Attempts at Exercise 4.3, rank_metrics(losses, correct, n) -> (mean_loss, accuracy) as Python floats."""
import torch


def right_interleave(losses, correct, n):
    """Rebuilds the sampler's slot order (stack along dim 1, flatten: slot r + j*W) and keeps the first n slots."""
    slot_losses = torch.stack(list(losses), dim=1).flatten()[:n].double()
    slot_correct = torch.stack(list(correct), dim=1).flatten()[:n]
    return slot_losses.mean().item(), slot_correct.double().mean().item()


def right_scatter_by_slot(losses, correct, n):
    """Python sums over (rank, j) pairs whose slot r + j*W is below n, counted in a dict by slot."""
    world_size = len(losses)
    seen = {}
    for r, (rank_losses, rank_correct) in enumerate(zip(losses, correct)):
        for j, (loss, ok) in enumerate(zip(rank_losses.tolist(), rank_correct.tolist())):
            slot = r + j * world_size
            if slot < n:
                seen[slot] = (loss, ok)
    return sum(v[0] for v in seen.values()) / len(seen), sum(v[1] for v in seen.values()) / len(seen)


def wrong_counts_padding(losses, correct, n):
    """Averages every entry, padding copies included: n=10, world_size=4 counts examples 0 and 1 twice."""
    all_losses = torch.cat(list(losses)).double()
    all_correct = torch.cat(list(correct)).double()
    return all_losses.mean().item(), all_correct.mean().item()


def wrong_mean_of_rank_means(losses, correct, n):
    """Drops the copies but averages the ranks' means: n=10, world_size=4 weighs rank 0's 3 like rank 3's 2."""
    world_size = len(losses)
    loss_means, acc_means = [], []
    for r in range(world_size):
        keep = torch.tensor([r + j * world_size < n for j in range(len(losses[r]))])
        loss_means.append(losses[r][keep].double().mean().item())
        acc_means.append(correct[r][keep].double().mean().item())
    return sum(loss_means) / world_size, sum(acc_means) / world_size


def wrong_concat_then_cut(losses, correct, n):
    """Concatenates rank after rank and keeps the first n: n=10, world_size=4 drops rank 3's real entry, keeps a copy."""
    return (torch.cat(list(losses))[:n].double().mean().item(),
            torch.cat(list(correct))[:n].double().mean().item())


def wrong_drops_last_everywhere(losses, correct, n):
    """Drops each rank's last entry when n % W != 0: n=10, world_size=4 loses the real examples 8 and 9."""
    world_size = len(losses)
    cut = -1 if n % world_size else None
    kept_losses = torch.cat([l[:cut] for l in losses]).double()
    kept_correct = torch.cat([c[:cut] for c in correct]).double()
    return kept_losses.mean().item(), kept_correct.mean().item()


def wrong_modulo_when_divisible(losses, correct, n):
    """Last entry real only for r < n % W, forgetting n % W == 0: n=8, world_size=4 drops 4 real examples."""
    world_size = len(losses)
    kept_l, kept_c = [], []
    for r in range(world_size):
        last_real = r < n % world_size
        end = len(losses[r]) if last_real else len(losses[r]) - 1
        kept_l.append(losses[r][:end])
        kept_c.append(correct[r][:end])
    return torch.cat(kept_l).double().mean().item(), torch.cat(kept_c).double().mean().item()


def wrong_off_by_one_slot(losses, correct, n):
    """Keeps slots r + j*W <= n: n=10, world_size=4 counts slot 10 (a copy of example 0) once more."""
    world_size = len(losses)
    total_loss, total_correct, count = 0.0, 0.0, 0
    for r in range(world_size):
        keep = torch.tensor([r + j * world_size <= n for j in range(len(losses[r]))])
        total_loss += losses[r][keep].double().sum().item()
        total_correct += correct[r][keep].double().sum().item()
        count += int(keep.sum())
    return total_loss / count, total_correct / count


def wrong_int_mask_index(losses, correct, n):
    """Keep mask built as 0/1 ints, used as an index: it picks entries 0 and 1, not the real slots: n=10, W=4."""
    world_size = len(losses)
    total_loss, total_correct, count = 0.0, 0.0, 0
    for r in range(world_size):
        keep = torch.tensor([int(r + j * world_size < n) for j in range(len(losses[r]))])
        total_loss += losses[r][keep].double().sum().item()
        total_correct += correct[r][keep].double().sum().item()
        count += int(keep.sum())
    return total_loss / count, total_correct / count


def wrong_divides_by_slots(losses, correct, n):
    """Sums the real entries but divides by every slot: n=10, world_size=4 divides by 12, both numbers too low."""
    world_size = len(losses)
    slots = sum(len(l) for l in losses)
    total_loss = total_correct = 0.0
    for r in range(world_size):
        keep = torch.tensor([r + j * world_size < n for j in range(len(losses[r]))])
        total_loss += losses[r][keep].double().sum().item()
        total_correct += correct[r][keep].double().sum().item()
    return total_loss / slots, total_correct / slots


def wrong_zeroes_padding_in_place(losses, correct, n):
    """Zeroes the copies in the caller's tensors (losses[r][~keep] = 0) to sum them away: any n not divisible by W."""
    world_size = len(losses)
    for r in range(world_size):
        keep = torch.tensor([r + j * world_size < n for j in range(len(losses[r]))])
        losses[r][~keep] = 0
        correct[r][~keep] = False
    return (torch.cat(list(losses)).double().sum().item() / n,
            torch.cat(list(correct)).double().sum().item() / n)


def wrong_returns_tensors(losses, correct, n):
    """Right values as 0-d tensors, not Python floats: any input."""
    slot_losses = torch.stack(list(losses), dim=1).flatten()[:n]
    slot_correct = torch.stack(list(correct), dim=1).flatten()[:n]
    return slot_losses.double().mean(), slot_correct.double().mean()
