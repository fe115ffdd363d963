"""Workers of an elastic job: their error reporting (:mod:`.errors`)."""
