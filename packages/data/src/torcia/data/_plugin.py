"""torcia-data's entry in the ``torcia`` entry-point group.

torcia-data defines no hooks and fills no registry: datasets are classes a user imports,
not names to look up. The entry point is kept so that the part is listed, with its
distribution and version, by ``python -m torcia plugins`` beside the other parts; a module
with no hook implementations is registered by the plugin manager and costs nothing.
"""
