"""``torch.distributed._composable``'s names that libraries import: ``fsdp.fully_shard``
(its home before ``torch.distributed.fsdp``)."""
