"""The names :mod:`torcia.special` imports from its old home: softmax and log-softmax live in
:mod:`torcia._oplib.nn_activation` now. :mod:`torcia.special` was being changed elsewhere
while the ops moved; once it imports from there, this file goes. Nothing else may import it.
"""

from torcia._oplib.nn_activation import log_softmax as log_softmax
from torcia._oplib.nn_activation import softmax as softmax
