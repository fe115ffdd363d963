"""Workers of an elastic job: their error reporting
(``torcia.distributed.elastic.multiprocessing.errors``)."""
