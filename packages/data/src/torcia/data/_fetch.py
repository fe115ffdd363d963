"""Turning one task (a list of indices, or "the next batch") into a batch; shared by the
main process (``num_workers=0``) and the workers."""

from __future__ import annotations

from torcia.data.dataset import _fetch_many


class Fetcher:
    """Turns a task into a batch, for a map-style or an iterable dataset."""

    def __init__(self, dataset, iterable, auto_collation, collate_fn, drop_last, batch_size):
        self.dataset = dataset
        self.iterable = iterable
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        self.drop_last = drop_last
        self.batch_size = batch_size
        self.iterator = iter(dataset) if iterable else None

    def restart(self) -> None:
        if self.iterable:
            self.iterator = iter(self.dataset)

    def fetch(self, indices):
        """The collated batch; StopIteration when an iterable dataset is exhausted."""
        if not self.iterable:
            if self.auto_collation:
                return self.collate_fn(_fetch_many(self.dataset, indices))
            return self.collate_fn(self.dataset[indices])
        if not self.auto_collation:
            return self.collate_fn(next(self.iterator))
        # without a fixed batch size, as PyTorch's fetchers: one item per index
        size = self.batch_size if self.batch_size is not None else len(indices)
        batch = []
        for item in self.iterator:
            batch.append(item)
            if len(batch) == size:
                break
        if not batch or (self.drop_last and len(batch) < size):
            raise StopIteration
        return self.collate_fn(batch)


class _DatasetKind:
    """The two kinds of dataset a loader fetches from, as ``torch.utils.data._DatasetKind``.

    Examples
    --------
    >>> from torcia.data import _DatasetKind
    >>> f = _DatasetKind.create_fetcher(_DatasetKind.Map, [10, 20, 30], True, list, False)
    >>> f.fetch([2, 0])
    [30, 10]
    """

    Map = 0
    Iterable = 1

    @staticmethod
    def create_fetcher(kind, dataset, auto_collation, collate_fn, drop_last):
        """A fetcher turning a list of indices (map-style) or a batch-sized list
        (iterable) into a collated batch."""
        return Fetcher(dataset, kind == _DatasetKind.Iterable, auto_collation, collate_fn,
                       drop_last, None)
