# Mirrors: yunjey/pytorch-tutorial, tutorials/02-intermediate/language_model/main.py (last changed in dd297a1,
# 2019-08-27), snapshot at commit 0500d3d (2020-07-06).
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: a corpus turned into a (batch, length) tensor of word ids, cut into windows of seq_length by slicing (no
# DataLoader); an LSTM language model (embedding, one LSTM layer, a linear decoder over every step) that returns
# its states; Adam and cross-entropy; per epoch fresh zero states; per window: the states detached (truncated
# backpropagation through time), forward, loss, zero_grad, backward, clip_grad_norm_(0.5), step, a print with the
# perplexity; afterwards words sampled one at a time under no_grad. Shrunk: a 20-word vocabulary, 20 x 160 ids,
# seq_length 16, embedding 8, hidden 16, 2 epochs, 20 sampled words (not 128, 1024, 5 epochs and 1,000).
# Added: `with watch(...)` around training and sampling.
import numpy as np
import torch
from torch import nn
from torch.nn.utils import clip_grad_norm_


class RNNLM(nn.Module):
    def __init__(self, vocab_size, embed_size, hidden_size, num_layers):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, embed_size)
        self.lstm = nn.LSTM(embed_size, hidden_size, num_layers, batch_first=True)
        self.linear = nn.Linear(hidden_size, vocab_size)

    def forward(self, x, h):
        out, (h, c) = self.lstm(self.embed(x), h)
        return self.linear(out.reshape(out.size(0) * out.size(1), out.size(2))), (h, c)


def corpus_ids(batch_size, vocab, length, seed=0):
    """Word ids of a text that follows a few fixed phrases with noise, folded into batch_size rows."""
    g = torch.Generator().manual_seed(seed)
    phrases = torch.randint(0, vocab, (6, 8), generator=g)
    stream = torch.cat([phrases[int(torch.randint(0, 6, (1,), generator=g))] for _ in range(batch_size * length // 8)])
    return stream[:batch_size * length].view(batch_size, length)


def main(watch):
    torch.manual_seed(0)
    vocab_size, embed_size, hidden_size, num_layers = 20, 8, 16, 1
    num_epochs, num_samples, batch_size, seq_length = 2, 20, 20, 16
    ids = corpus_ids(batch_size, vocab_size, 160)
    num_batches = ids.size(1) // seq_length
    model = RNNLM(vocab_size, embed_size, hidden_size, num_layers)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

    def detach(states):
        return [state.detach() for state in states]

    with watch(model):
        for epoch in range(num_epochs):
            states = (torch.zeros(num_layers, batch_size, hidden_size), torch.zeros(num_layers, batch_size, hidden_size))
            for i in range(0, ids.size(1) - seq_length, seq_length):
                inputs, targets = ids[:, i:i + seq_length], ids[:, (i + 1):(i + 1) + seq_length]
                states = detach(states)
                outputs, states = model(inputs, states)
                loss = criterion(outputs, targets.reshape(-1))
                optimizer.zero_grad()
                loss.backward()
                clip_grad_norm_(model.parameters(), 0.5)
                optimizer.step()
                step = (i + 1) // seq_length
                if step % 4 == 0:
                    print(f"epoch {epoch + 1}, step {step}/{num_batches}, loss {loss.item():.4f}, "
                          f"perplexity {np.exp(loss.item()):5.2f}")
        with torch.no_grad():
            state = (torch.zeros(num_layers, 1, hidden_size), torch.zeros(num_layers, 1, hidden_size))
            word = torch.multinomial(torch.ones(vocab_size), num_samples=1).unsqueeze(1)
            words = []
            for _ in range(num_samples):
                output, state = model(word, state)
                word_id = torch.multinomial(output.exp(), num_samples=1).item()
                word.fill_(word_id)
                words.append(word_id)
    return [model, optimizer]


from tests.doctor_published import variant  # noqa: E402

VARIANTS = [
    variant("no_zero_grad", "missing_zero_grad", ("                optimizer.zero_grad()\n", "")),
    variant("clip_before_backward", "clip_before_backward",
            ("                loss.backward()\n                clip_grad_norm_(model.parameters(), 0.5)\n",
             "                clip_grad_norm_(model.parameters(), 0.5)\n                loss.backward()\n")),
    variant("clip_after_step", "clip_after_step",
            ("                clip_grad_norm_(model.parameters(), 0.5)\n                optimizer.step()\n",
             "                optimizer.step()\n                clip_grad_norm_(model.parameters(), 0.5)\n")),
    variant("losses_kept_for_a_plot", "graph_attached_logging",
            ("    with watch(model):\n", "    history = []\n    with watch(model):\n"),
            ("                optimizer.step()\n", "                optimizer.step()\n                history.append(loss)\n")),
    variant("sampling_with_gradients", "missing_no_grad", ("        with torch.no_grad():\n", "        if True:\n")),
]
