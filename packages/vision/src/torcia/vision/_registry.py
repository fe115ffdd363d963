"""The tables torcia-vision's hooks fill (see :mod:`torcia.vision.hookspecs`)."""

from torcia import plugins
from torcia.vision import hookspecs

plugins.add_hookspecs(hookspecs)

models = plugins.Registry("model", "torcia_register_models")
datasets = plugins.Registry("dataset", "torcia_register_datasets")
