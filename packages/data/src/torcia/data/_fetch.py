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
        batch = []
        for item in self.iterator:
            batch.append(item)
            if len(batch) == self.batch_size:
                break
        if not batch or (self.drop_last and len(batch) < self.batch_size):
            raise StopIteration
        return self.collate_fn(batch)
