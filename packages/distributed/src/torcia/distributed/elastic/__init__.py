"""torcia.distributed.elastic: what scripts started by ``torcia-run`` (torcia's
``torchrun``) use of ``torch.distributed.elastic``: the error reporting of
:mod:`torcia.distributed.elastic.multiprocessing.errors` (``@record``). The elastic agent
itself is ``torcia-run``, :mod:`torcia.distributed.run`."""
