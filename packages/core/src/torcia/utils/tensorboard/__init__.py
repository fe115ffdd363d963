"""TensorBoard logging, as ``torch.utils.tensorboard``: :class:`SummaryWriter` writes
event files that TensorBoard (and its event readers) read, through the ``tensorboard``
package, the ``tensorboard`` extra of torcia-core (``pip install
'torcia-core[tensorboard]'``); the protocol buffers and the event-file format are
TensorBoard's own, so what TensorBoard shows is what was written.

Examples
--------
>>> import tempfile
>>> import torcia
>>> from torcia.utils.tensorboard import SummaryWriter
>>> with tempfile.TemporaryDirectory() as logdir:
...     with SummaryWriter(logdir) as writer:
...         for step in range(3):
...             writer.add_scalar("loss", 1.0 / (step + 1), step)
...         writer.add_histogram("weights", torcia.randn(100), 0)
...     from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
...     events = EventAccumulator(logdir).Reload()
...     [round(e.value, 3) for e in events.Scalars("loss")]
[1.0, 0.5, 0.333]
"""

try:
    import tensorboard  # noqa: F401 - the extra this module needs
except ImportError:
    raise ImportError("torcia.utils.tensorboard writes through the tensorboard package, which "
                      "is not installed: pip install 'torcia-core[tensorboard]'") from None

from tensorboard.summary.writer.record_writer import RecordWriter

from torcia.utils.tensorboard.writer import FileWriter, SummaryWriter

__all__ = ["FileWriter", "RecordWriter", "SummaryWriter"]
