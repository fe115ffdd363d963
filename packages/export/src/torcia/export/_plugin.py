"""torcia-export's entry in the ``torcia`` entry-point group.

torcia-export defines no hooks and fills no registry; the entry point is kept so that
the part is listed, with its distribution and version, by ``python -m torcia plugins``
beside the other parts (and so that the API reference finds its root,
``torcia.export``).
"""
