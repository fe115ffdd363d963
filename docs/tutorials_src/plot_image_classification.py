"""
Image classification with torcia-vision
=======================================

Train the vision demo's small CNN on the 8x8 handwritten digits that torcia-vision ships
(:class:`torcia.vision.datasets.Digits`), and plot the training curves. ``torcia-train``
runs the same job from the command line.
"""

import matplotlib.pyplot as plt

import torcia
from torcia import nn
from torcia.data import DataLoader
from torcia.vision import transforms
from torcia.vision.datasets import Digits
from torcia.vision.models import small_cnn

torcia.manual_seed(0)

# %%
# Data: tensors of shape (1, 8, 8), normalised to [-1, 1].
to_tensor = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.5,), (0.5,))])
train, test = Digits(train=True, transform=to_tensor), Digits(train=False, transform=to_tensor)
loader = DataLoader(train, batch_size=64, shuffle=True)
image, label = train[0]
print(len(train), "training images,", len(test), "held out; one is", tuple(image.shape))

# %%
# The model and one epoch at a time: forward, loss, backward, step.
model = small_cnn()
optimizer = torcia.optim.Adam(model.parameters(), lr=3e-3)
loss_fn = nn.CrossEntropyLoss()


def accuracy(dataset):
    model.eval()
    with torcia.no_grad():
        xs = torcia.stack([dataset[i][0] for i in range(len(dataset))])
        ys = torcia.tensor([dataset[i][1] for i in range(len(dataset))])
        return (model(xs).argmax(1) == ys).float().mean().item()


losses, accuracies = [], []
for epoch in range(4):
    model.train()
    for x, y in loader:
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    accuracies.append(accuracy(test))
    print(f"epoch {epoch + 1}: last loss {losses[-1]:.3f}, held-out accuracy {accuracies[-1]:.3f}")

# %%
# The training curves.
fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.2))
left.plot(losses)
left.set(xlabel="step", ylabel="training loss", title="loss")
right.plot(range(1, len(accuracies) + 1), accuracies, marker="o")
right.set(xlabel="epoch", ylabel="held-out accuracy", title="accuracy", ylim=(0, 1))
fig.tight_layout()

# %%
# A few held-out digits with the model's guesses.
fig, axes = plt.subplots(1, 6, figsize=(9, 1.8))
model.eval()
for ax, i in zip(axes, range(6), strict=True):
    x, y = test[i]
    guess = model(x.unsqueeze(0)).argmax(1).item()
    ax.imshow(x[0].numpy(), cmap="gray")
    ax.set_title(f"{guess} (true {y})", fontsize=9)
    ax.axis("off")
