"""torchmetrics: classification and regression metrics, updated over batches."""

from common import case, numpy, randint, randn


@case(needs=("torcia.jit",))
def case_classification():
    import torchmetrics

    metrics = {
        "acc": torchmetrics.Accuracy(task="multiclass", num_classes=4),
        "f1": torchmetrics.F1Score(task="multiclass", num_classes=4, average="macro"),
        "auroc": torchmetrics.AUROC(task="multiclass", num_classes=4),
        "confmat": torchmetrics.ConfusionMatrix(task="multiclass", num_classes=4),
    }
    for step in range(3):
        logits = randn(16, 4, seed=step)
        target = randint(4, 16, seed=10 + step)
        for m in metrics.values():
            m.update(logits.softmax(-1), target)
    return {name: numpy(m.compute()) for name, m in metrics.items()}


@case(needs=("torcia.jit",))
def case_regression():
    import torchmetrics

    metrics = {"mse": torchmetrics.MeanSquaredError(), "mae": torchmetrics.MeanAbsoluteError(),
               "r2": torchmetrics.R2Score(), "pearson": torchmetrics.PearsonCorrCoef()}
    for step in range(3):
        preds, target = randn(20, seed=step), randn(20, seed=5 + step)
        for m in metrics.values():
            m.update(preds, target)
    return {name: numpy(m.compute()) for name, m in metrics.items()}


@case(needs=("torcia.jit",))
def case_functional():
    import torchmetrics.functional as F

    preds, target = randn(10, 3, seed=1).softmax(-1), randint(3, 10, seed=2)
    return {"acc": numpy(F.accuracy(preds, target, task="multiclass", num_classes=3)),
            "precision": numpy(F.precision(preds, target, task="multiclass", num_classes=3)),
            "collection_mse": numpy(F.mean_squared_error(randn(5, seed=3), randn(5, seed=4)))}
