# Mirrors: yunjey/pytorch-tutorial, tutorials/03-advanced/generative_adversarial_network/main.py (last changed in
# dd297a1, 2019-08-27), snapshot at commit 0500d3d (2020-07-06).
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: MNIST normalised to [-1, 1] and flattened; a discriminator (two LeakyReLU layers, a sigmoid) and a
# generator (two ReLU layers, tanh) as Sequentials; BCE and one Adam per model; a reset_grad() that zeroes both
# optimizers; per batch: D on real images, G's fakes (not detached) through D, d_loss = real + fake, reset_grad,
# backward, D's step; then fresh fakes through D, g_loss against the real labels, reset_grad, backward, G's step
# (the generator's gradients from the D step are cleared unused, by design); a periodic print with .item();
# after each epoch a grid of the last fakes is written. Shrunk: 8x8 stand-in digits (256, batch 32), hidden 32,
# latent 8, 2 epochs (not 200); the images are written to memory. Added: `with watch(...)` around the epochs,
# given both models.
import io

import torch
from torch import nn
from torch.utils.data import DataLoader

from tests.doctor_published.standins import datasets, transforms


def main(watch):
    torch.manual_seed(0)
    latent_size, hidden_size, image_size, epochs, batch_size = 8, 32, 64, 2, 32
    mnist = datasets.MNIST("data", train=True, download=True,
                           transform=transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.5,), (0.5,))]))
    data_loader = DataLoader(mnist, batch_size=batch_size, shuffle=True)
    D = nn.Sequential(nn.Linear(image_size, hidden_size), nn.LeakyReLU(0.2), nn.Linear(hidden_size, hidden_size),
                      nn.LeakyReLU(0.2), nn.Linear(hidden_size, 1), nn.Sigmoid())
    G = nn.Sequential(nn.Linear(latent_size, hidden_size), nn.ReLU(), nn.Linear(hidden_size, hidden_size), nn.ReLU(),
                      nn.Linear(hidden_size, image_size), nn.Tanh())
    criterion = nn.BCELoss()
    d_optimizer = torch.optim.Adam(D.parameters(), lr=0.0002)
    g_optimizer = torch.optim.Adam(G.parameters(), lr=0.0002)

    def reset_grad():
        d_optimizer.zero_grad()
        g_optimizer.zero_grad()

    with watch([D, G]):
        for epoch in range(epochs):
            for i, (images, _) in enumerate(data_loader):
                images = images.reshape(batch_size, -1)
                real_labels, fake_labels = torch.ones(batch_size, 1), torch.zeros(batch_size, 1)
                outputs = D(images)
                d_loss_real = criterion(outputs, real_labels)
                real_score = outputs
                z = torch.randn(batch_size, latent_size)
                fake_images = G(z)
                outputs = D(fake_images)
                d_loss_fake = criterion(outputs, fake_labels)
                fake_score = outputs
                d_loss = d_loss_real + d_loss_fake
                reset_grad()
                d_loss.backward()
                d_optimizer.step()

                z = torch.randn(batch_size, latent_size)
                fake_images = G(z)
                outputs = D(fake_images)
                g_loss = criterion(outputs, real_labels)
                reset_grad()
                g_loss.backward()
                g_optimizer.step()
                if (i + 1) % 4 == 0:
                    print(f"epoch {epoch}, step {i + 1}: d_loss {d_loss.item():.4f}, g_loss {g_loss.item():.4f}, "
                          f"D(x) {real_score.mean().item():.2f}, D(G(z)) {fake_score.mean().item():.2f}")
            grid = ((fake_images.reshape(-1, 1, 8, 8) + 1) / 2).clamp(0, 1)
            torch.save(grid, io.BytesIO())
    return [D, G, d_optimizer, g_optimizer]


from tests.doctor_published import variant  # noqa: E402

VARIANTS = [
    variant("reset_forgets_the_discriminator", "missing_zero_grad", ("        d_optimizer.zero_grad()\n", "")),
    variant("reset_between_backward_and_step", "zero_grad_after_backward",
            ("                d_loss.backward()\n                d_optimizer.step()\n",
             "                d_loss.backward()\n                reset_grad()\n                d_optimizer.step()\n")),
    variant("losses_kept_for_a_plot", "graph_attached_logging",
            ("    with watch([D, G]):\n", "    history = []\n    with watch([D, G]):\n"),
            ("                g_optimizer.step()\n", "                g_optimizer.step()\n                history.append((d_loss, g_loss))\n")),
]
