"""
Quantization: int8 models from float ones
=========================================

:mod:`torcia.ao.quantization` offers PyTorch's ways to an int8 model, on one set of
kernels (torcia-cpu runs them on oneDNN's integer GEMM where its ``int8`` extra is
installed): dynamic quantization of Linear and LSTM layers, static post-training
quantization with observers and calibration, quantization-aware training, and torchao's
``quantize_`` with int8 and int4 weight configs. Here a digits classifier goes through
them.
"""

import copy
import io

import matplotlib.pyplot as plt

import torcia
from torcia import nn
from torcia.ao import quantization as tq
from torcia.data import DataLoader
from torcia.vision import datasets, models
from torcia.vision import transforms as T

torcia.manual_seed(0)
tf = T.Compose([T.ToTensor(), T.Normalize((0.3,), (0.4,))])
train = DataLoader(datasets.Digits(train=True, transform=tf), batch_size=64, shuffle=True)
x_test, y_test = next(iter(DataLoader(datasets.Digits(train=False, transform=tf),
                                      batch_size=360)))


def fit(model, lr, epochs):
    opt = torcia.optim.Adam(model.parameters(), lr=lr)
    model.train()
    for _ in range(epochs):
        for x, y in train:
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()


def accuracy(model):
    model.eval()
    with torcia.no_grad():
        return (model(x_test).argmax(1) == y_test).float().mean().item() * 100


def size_kb(model):
    buf = io.BytesIO()
    torcia.save(model.state_dict(), buf)
    return len(buf.getvalue()) / 1024


model = models.small_cnn()
fit(model, 2e-3, 8)
results = {"float32": accuracy(model)}
print(f"float32 accuracy {results['float32']:.1f}%")

# %%
# Static post-training quantization: mark where quantized tensors start and end, fuse
# conv-bn-relu, give a QConfig (x86's: a histogram of the activations, int8 weights per
# channel), observe calibration data, convert.
def quantizable(m):
    return nn.Sequential(tq.QuantStub(), m.features, m.avgpool, nn.Flatten(1), m.classifier,
                         tq.DeQuantStub())


groups = [["1.0", "1.1", "1.2"], ["1.3", "1.4", "1.5"], ["1.7", "1.8", "1.9"]]
ptq = tq.fuse_modules(quantizable(copy.deepcopy(model)).eval(), groups)
ptq.qconfig = tq.get_default_qconfig("x86")
prepared = tq.prepare(ptq)
with torcia.no_grad():
    for x, _ in train:
        prepared(x)
ptq = tq.convert(prepared)
results["static PTQ"] = accuracy(ptq)
print(ptq[1][0])
print(f"PTQ accuracy {results['static PTQ']:.1f}%")

# %%
# Quantization-aware training: fine-tune with the rounding in the forward pass (fake
# quantization, straight-through gradients), then convert.
qat = tq.fuse_modules_qat(quantizable(copy.deepcopy(model)).train(), groups)
qat.qconfig = tq.get_default_qat_qconfig("x86")
qat = tq.prepare_qat(qat)
fit(qat, 2e-4, 2)
qat = tq.convert(qat.eval())
results["QAT"] = accuracy(qat)
print(f"QAT accuracy {results['QAT']:.1f}%")

# %%
# Quantized tensors underneath: integers, a scale and a zero point.
q = torcia.quantize_per_tensor(x_test[0, 0, 0], 0.05, 128, torcia.quint8)
print(q.int_repr().tolist(), q.q_scale(), q.q_zero_point())

# %%
# Dynamic quantization of a Linear-heavy model, and torchao's weight configs: int8
# weights with activations quantized per call, int8 weight-only, 4-bit weight-only.
mlp = nn.Sequential(nn.Flatten(), nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256),
                    nn.ReLU(), nn.Linear(256, 10))
fit(mlp, 2e-3, 8)
variants = {"float32 MLP": mlp, "quantize_dynamic": tq.quantize_dynamic(mlp, {nn.Linear})}
for name, config in [("int8 dynamic (quantize_)", tq.Int8DynamicActivationInt8WeightConfig()),
                     ("int8 weight-only", tq.Int8WeightOnlyConfig()),
                     ("int4 weight-only", tq.Int4WeightOnlyConfig(group_size=32))]:
    variants[name] = copy.deepcopy(mlp)
    tq.quantize_(variants[name], config)
for name, m in variants.items():
    print(f"{name:26s} {accuracy(m):5.1f}%  {size_kb(m):6.1f} KiB")

# %%
# Accuracy of the CNN through each route.
fig, ax = plt.subplots(figsize=(5, 3))
ax.bar(list(results), list(results.values()), color=["grey", "tab:blue", "tab:green"])
ax.set_ylim(min(results.values()) - 3, 100)
ax.set_ylabel("test accuracy (%)")
ax.set_title("digits classifier, float32 and int8")
for i, v in enumerate(results.values()):
    ax.text(i, v + 0.2, f"{v:.1f}", ha="center")
fig.tight_layout()
