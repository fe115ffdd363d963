"""``SummaryWriter`` and ``FileWriter``: event files for TensorBoard, written with
TensorBoard's own event-file writer."""

from __future__ import annotations

import os
import socket
import time
from datetime import datetime

import numpy as np
from tensorboard.compat.proto import event_pb2
from tensorboard.compat.proto.event_pb2 import Event, SessionLog
from tensorboard.compat.proto.graph_pb2 import GraphDef
from tensorboard.compat.proto.node_def_pb2 import NodeDef
from tensorboard.compat.proto.versions_pb2 import VersionDef
from tensorboard.summary.writer.event_file_writer import EventFileWriter

import torcia
from torcia.utils.tensorboard import summary as S

__all__ = ["FileWriter", "SummaryWriter"]


class FileWriter:
    """Events into one event file of ``log_dir``, asynchronously (flushed every
    ``flush_secs`` seconds or ``max_queue`` events).

    Examples
    --------
    >>> import tempfile
    >>> from torcia.utils.tensorboard import FileWriter
    >>> from torcia.utils.tensorboard.summary import scalar
    >>> with tempfile.TemporaryDirectory() as logdir:
    ...     writer = FileWriter(logdir)
    ...     writer.add_summary(scalar("x", 1.0), global_step=0)
    ...     writer.close()
    """

    def __init__(self, log_dir, max_queue=10, flush_secs=120, filename_suffix=""):
        self.event_writer = EventFileWriter(str(log_dir), max_queue, flush_secs,
                                            filename_suffix)

    def get_logdir(self) -> str:
        return self.event_writer.get_logdir()

    def add_event(self, event, step=None, walltime=None) -> None:
        event.wall_time = time.time() if walltime is None else walltime
        if step is not None:
            event.step = int(step)
        self.event_writer.add_event(event)

    def add_summary(self, summary, global_step=None, walltime=None) -> None:
        self.add_event(event_pb2.Event(summary=summary), global_step, walltime)

    def add_graph(self, graph_profile, walltime=None) -> None:
        """A ``(GraphDef, RunMetadata)`` pair, or a GraphDef alone."""
        graph, stats = graph_profile if isinstance(graph_profile, tuple) else (
            graph_profile, None)
        self.add_event(event_pb2.Event(graph_def=graph.SerializeToString()), None, walltime)
        if stats is not None:
            trm = event_pb2.TaggedRunMetadata(tag="step1",
                                              run_metadata=stats.SerializeToString())
            self.add_event(event_pb2.Event(tagged_run_metadata=trm), None, walltime)

    def flush(self) -> None:
        self.event_writer.flush()

    def close(self) -> None:
        self.event_writer.close()

    def reopen(self) -> None:
        self.event_writer.reopen()


class SummaryWriter:
    """Log scalars, histograms, images, figures, text, hyperparameters, the graph of a
    model, embeddings and more for TensorBoard, as ``torch.utils.tensorboard``'s.

    Parameters
    ----------
    log_dir : str, optional
        Where the event files go (``runs/<date>_<host><comment>`` by default).
    comment : str
        Appended to the default ``log_dir``.
    purge_step : int, optional
        Events of a crashed earlier run at this step and later are hidden by TensorBoard.
    max_queue, flush_secs : int
        When pending events are written: after this many, or this many seconds.
    filename_suffix : str
        Appended to the event file's name.

    Examples
    --------
    >>> import tempfile
    >>> import torcia
    >>> from torcia.utils.tensorboard import SummaryWriter
    >>> with tempfile.TemporaryDirectory() as logdir:
    ...     writer = SummaryWriter(logdir)
    ...     writer.add_scalars("loss", {"train": 0.5, "val": 0.7}, 1)
    ...     writer.add_text("notes", "first run", 0)
    ...     writer.add_image("sample", torcia.rand(3, 8, 8), 0)
    ...     writer.close()
    """

    def __init__(self, log_dir=None, comment="", purge_step=None, max_queue=10,
                 flush_secs=120, filename_suffix=""):
        if not log_dir:
            stamp = datetime.now().strftime("%b%d_%H-%M-%S")
            log_dir = os.path.join("runs", f"{stamp}_{socket.gethostname()}{comment}")
        self.log_dir = log_dir
        self.purge_step = purge_step
        self.max_queue = max_queue
        self.flush_secs = flush_secs
        self.filename_suffix = filename_suffix
        self.file_writer = self.all_writers = None
        self._get_file_writer()
        # TensorFlow's default histogram buckets: 1e-12 growing by 10% to 1e20, and
        # their negatives
        v, buckets = 1e-12, []
        while v < 1e20:
            buckets.append(v)
            v *= 1.1
        self.default_bins = [-b for b in reversed(buckets)] + [0] + buckets

    def _get_file_writer(self) -> FileWriter:
        if self.all_writers is None or self.file_writer is None:
            self.file_writer = FileWriter(self.log_dir, self.max_queue, self.flush_secs,
                                          self.filename_suffix)
            self.all_writers = {self.file_writer.get_logdir(): self.file_writer}
            if self.purge_step is not None:
                step = self.purge_step
                self.file_writer.add_event(Event(step=step, file_version="brain.Event:2"))
                self.file_writer.add_event(Event(step=step, session_log=SessionLog(
                    status=SessionLog.START)))
                self.purge_step = None
        return self.file_writer

    def get_logdir(self) -> str:
        """The directory the events go to."""
        return self.log_dir

    def _add(self, summary, global_step, walltime) -> None:
        self._get_file_writer().add_summary(summary, global_step, walltime)

    # ----- scalars ----------------------------------------------------------------------
    def add_scalar(self, tag, scalar_value, global_step=None, walltime=None, new_style=False,
                   double_precision=False) -> None:
        """One value of the series ``tag`` (a number or a one-element tensor)."""
        self._add(S.scalar(tag, scalar_value, new_style, double_precision), global_step,
                  walltime)

    def add_scalars(self, main_tag, tag_scalar_dict, global_step=None, walltime=None) -> None:
        """Several series in one chart: each goes to its own run,
        ``<log_dir>/<main_tag>_<tag>``, as in PyTorch."""
        walltime = time.time() if walltime is None else walltime
        logdir = self._get_file_writer().get_logdir()
        for tag, value in tag_scalar_dict.items():
            path = os.path.join(logdir, f"{main_tag.replace('/', '_')}_{tag}")
            writer = self.all_writers.get(path)
            if writer is None:
                writer = self.all_writers[path] = FileWriter(path, self.max_queue,
                                                             self.flush_secs,
                                                             self.filename_suffix)
            writer.add_summary(S.scalar(main_tag, value), global_step, walltime)

    def add_tensor(self, tag, tensor, global_step=None, walltime=None) -> None:
        """A whole tensor (the tensor plugin)."""
        self._add(S.tensor_proto(tag, tensor), global_step, walltime)

    # ----- distributions --------------------------------------------------------------
    def add_histogram(self, tag, values, global_step=None, bins="tensorflow", walltime=None,
                      max_bins=None) -> None:
        """A histogram of ``values``; ``bins`` as NumPy's, or ``"tensorflow"``'s
        exponential buckets."""
        if isinstance(bins, str) and bins == "tensorflow":
            bins = self.default_bins
        self._add(S.histogram(tag, values, bins, max_bins=max_bins), global_step, walltime)

    def add_histogram_raw(self, tag, min, max, num, sum, sum_squares,  # noqa: A002
                          bucket_limits, bucket_counts, global_step=None, walltime=None):
        """A histogram from its statistics and buckets."""
        if len(bucket_limits) != len(bucket_counts):
            raise ValueError("len(bucket_limits) != len(bucket_counts), see the document.")
        self._add(S.histogram_raw(tag, min, max, num, sum, sum_squares, bucket_limits,
                                  bucket_counts), global_step, walltime)

    # ----- images, figures, audio, video ---------------------------------------------------
    def add_image(self, tag, img_tensor, global_step=None, walltime=None,
                  dataformats="CHW") -> None:
        """An image: floats in [0, 1] or uint8 in [0, 255], ``dataformats`` naming its
        axes."""
        self._add(S.image(tag, img_tensor, dataformats=dataformats), global_step, walltime)

    def add_images(self, tag, img_tensor, global_step=None, walltime=None,
                   dataformats="NCHW") -> None:
        """A batch of images, tiled into one."""
        self._add(S.image(tag, img_tensor, dataformats=dataformats), global_step, walltime)

    def add_image_with_boxes(self, tag, img_tensor, box_tensor, global_step=None,
                             walltime=None, rescale=1, dataformats="CHW", labels=None):
        """An image with ``(x_min, y_min, x_max, y_max)`` boxes drawn on it."""
        self._add(S.image_boxes(tag, img_tensor, box_tensor, rescale=rescale,
                                dataformats=dataformats, labels=labels), global_step, walltime)

    def add_figure(self, tag, figure, global_step=None, close=True, walltime=None) -> None:
        """A matplotlib figure (or a list of them, tiled), rendered to an image."""
        figures = figure if isinstance(figure, list) else [figure]
        images = [_render(fig, close) for fig in figures]
        if len(images) == 1:
            self.add_image(tag, images[0], global_step, walltime, dataformats="CHW")
        else:
            self.add_images(tag, np.stack(images), global_step, walltime, dataformats="NCHW")

    def add_video(self, tag, vid_tensor, global_step=None, fps=4, walltime=None) -> None:
        """PyTorch encodes videos as GIFs with moviepy; torcia has no GIF encoder: an
        error."""
        raise NotImplementedError("add_video is not supported by torcia (PyTorch needs the "
                                  "moviepy package to encode the video); log frames with "
                                  "add_images")

    def add_audio(self, tag, snd_tensor, global_step=None, sample_rate=44100,
                  walltime=None) -> None:
        """Mono audio in [-1, 1]."""
        self._add(S.audio(tag, snd_tensor, sample_rate=sample_rate), global_step, walltime)

    # ----- text and hyperparameters ------------------------------------------------------
    def add_text(self, tag, text_string, global_step=None, walltime=None) -> None:
        """A string (markdown)."""
        self._add(S.text(tag, text_string), global_step, walltime)

    def add_hparams(self, hparam_dict, metric_dict, hparam_domain_discrete=None,
                    run_name=None, global_step=None) -> None:
        """A run's hyperparameters and final metrics, for the hparams dashboard: written to
        the run ``<log_dir>/<run_name>`` (the time by default), with the metrics as
        scalars."""
        if type(hparam_dict) is not dict or type(metric_dict) is not dict:
            raise TypeError("hparam_dict and metric_dict should be dictionary.")
        exp, start, end = S.hparams(hparam_dict, metric_dict, hparam_domain_discrete)
        logdir = os.path.join(self._get_file_writer().get_logdir(),
                              run_name or str(time.time()))
        with SummaryWriter(log_dir=logdir) as run:
            for part in (exp, start, end):
                run.file_writer.add_summary(part, global_step)
            for k, v in metric_dict.items():
                run.add_scalar(k, v, global_step)

    # ----- curves and layouts -------------------------------------------------------------
    def add_pr_curve(self, tag, labels, predictions, global_step=None, num_thresholds=127,
                     weights=None, walltime=None) -> None:
        """A precision-recall curve of binary labels and predictions in [0, 1]."""
        self._add(S.pr_curve(tag, labels, predictions, num_thresholds, weights), global_step,
                  walltime)

    def add_pr_curve_raw(self, tag, true_positive_counts, false_positive_counts,
                         true_negative_counts, false_negative_counts, precision, recall,
                         global_step=None, num_thresholds=127, weights=None, walltime=None):
        """A precision-recall curve from its counts per threshold."""
        self._add(S.pr_curve_raw(tag, true_positive_counts, false_positive_counts,
                                 true_negative_counts, false_negative_counts, precision,
                                 recall, num_thresholds, weights), global_step, walltime)

    def add_custom_scalars(self, layout) -> None:
        """The custom-scalars dashboard's layout (see :func:`summary.custom_scalars`)."""
        self._add(S.custom_scalars(layout), None, None)

    def add_custom_scalars_multilinechart(self, tags, category="default", title="untitled"):
        """A custom chart of several scalar series."""
        self.add_custom_scalars({category: {title: ["Multiline", tags]}})

    def add_custom_scalars_marginchart(self, tags, category="default", title="untitled"):
        """A custom chart of a series with its lower and upper margins (three tags)."""
        if len(tags) != 3:
            raise AssertionError("len(tags) != 3")
        self.add_custom_scalars({category: {title: ["Margin", tags]}})

    def add_mesh(self, tag, vertices, colors=None, faces=None, config_dict=None,
                 global_step=None, walltime=None) -> None:
        """A 3-D mesh (the mesh plugin)."""
        self._add(S.mesh(tag, vertices, colors, faces, config_dict), global_step, walltime)

    # ----- the model's graph and embeddings ------------------------------------------------
    def add_graph(self, model, input_to_model=None, verbose=False, use_strict_trace=True):
        """The graph of ``model`` on ``input_to_model``, as recorded by autograd: a node
        per parameter, per input and per operation of the forward pass (named by the
        module that holds it where known)."""
        self._get_file_writer().add_graph(model_graph(model, input_to_model))

    def add_onnx_graph(self, prototxt) -> None:
        """PyTorch reads an ONNX file's graph with the onnx package; not supported by
        torcia: an error."""
        raise NotImplementedError("add_onnx_graph is not supported by torcia; log the model "
                                  "with add_graph")

    def add_embedding(self, mat, metadata=None, label_img=None, global_step=None,
                      tag="default", metadata_header=None) -> None:
        """Points for the projector: ``mat`` (N, D), with optional labels (``metadata``)
        and thumbnails (``label_img``, (N, C, H, W)), under
        ``<log_dir>/<step>/<tag>/``."""
        from google.protobuf import text_format
        from tensorboard.plugins.projector.projector_config_pb2 import (
            EmbeddingInfo,
            ProjectorConfig,
        )

        mat = S.make_np(mat)
        step = 0 if global_step is None else global_step
        subdir = f"{str(step).zfill(5)}/{tag.replace('/', '_').replace(' ', '_')}"
        logdir = self._get_file_writer().get_logdir()
        path = os.path.join(logdir, subdir)
        os.makedirs(path, exist_ok=True)
        if mat.ndim != 2:
            raise AssertionError("mat should be 2D, where mat.size(0) is the number of data "
                                 "points")
        info = EmbeddingInfo(tensor_name=f"{tag}:{str(step).zfill(5)}",
                             tensor_path=f"{subdir}/tensors.tsv")
        if metadata is not None:
            if mat.shape[0] != len(metadata):
                raise AssertionError("#labels should equal with #data points")
            rows = [str(m) for m in metadata] if not metadata_header else [
                "\t".join(str(e) for e in row) for row in [metadata_header, *metadata]]
            with open(os.path.join(path, "metadata.tsv"), "w") as f:
                f.write("\n".join(rows) + "\n")
            info.metadata_path = f"{subdir}/metadata.tsv"
        if label_img is not None:
            images = S.make_np(label_img)
            if mat.shape[0] != images.shape[0]:
                raise AssertionError("#images should equal with #data points")
            side = int(np.ceil(images.shape[0] ** 0.5))
            grid = S.make_grid(images, ncols=side).transpose(1, 2, 0)
            square = np.zeros((grid.shape[1], grid.shape[1], 3))
            square[: grid.shape[0]] = grid[..., :3]
            with open(os.path.join(path, "sprite.png"), "wb") as f:
                f.write(S._png((square * 255).clip(0, 255).astype(np.uint8)))
            info.sprite.image_path = f"{subdir}/sprite.png"
            info.sprite.single_image_dim.extend([images.shape[3], images.shape[2]])
        with open(os.path.join(path, "tensors.tsv"), "w") as f:
            for row in mat:
                f.write("\t".join(str(float(x)) for x in row) + "\n")
        if not hasattr(self, "_projector_config"):
            self._projector_config = ProjectorConfig()
        self._projector_config.embeddings.extend([info])
        with open(os.path.join(logdir, "projector_config.pbtxt"), "w") as f:
            f.write(text_format.MessageToString(self._projector_config))

    # ----- lifetime -----------------------------------------------------------------------
    def flush(self) -> None:
        """Write the pending events of every run."""
        for writer in (self.all_writers or {}).values():
            writer.flush()

    def close(self) -> None:
        """Flush and close every event file."""
        for writer in (self.all_writers or {}).values():
            writer.flush()
            writer.close()
        self.file_writer = self.all_writers = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _render(figure, close) -> np.ndarray:
    """A matplotlib figure as a (3, H, W) float image in [0, 1]."""
    figure.canvas.draw()
    rgba = np.asarray(figure.canvas.buffer_rgba())
    if close:
        import matplotlib.pyplot as plt

        plt.close(figure)
    return rgba[..., :3].transpose(2, 0, 1).astype(np.float32) / 255.0


def model_graph(model, inputs):
    """A GraphDef of ``model(*inputs)``: a node per input, per parameter and buffer
    reached, and per backward node of the output's graph (the operations), with the
    edges autograd recorded."""
    inputs = inputs if isinstance(inputs, (tuple, list)) else (inputs,)
    names = {id(p): name for name, p in model.named_parameters()}
    with torcia.enable_grad():
        inputs = tuple(x.detach().requires_grad_() if isinstance(x, torcia.Tensor) and
                       x.is_floating_point() else x for x in inputs)
        out = model(*inputs)
    outputs = out if isinstance(out, (tuple, list)) else (out,)
    for i, x in enumerate(inputs):
        if isinstance(x, torcia.Tensor):
            names[id(x)] = f"input/{i}"
    nodes, seen, order = {}, {}, []

    def visit(fn):
        key = id(fn)
        if key in seen:
            return seen[key]
        variable = getattr(fn, "variable", None)
        if variable is not None:  # a leaf: a parameter or an input
            name = names.get(id(variable), f"leaf/{len(seen)}")
            seen[key] = name
            nodes[name] = NodeDef(name=name, op="Parameter" if not name.startswith("input/")
                                  else "IO Node")
            _shape(nodes[name], variable)
            order.append(name)
            return name
        name = f"{fn.name()}/{len(seen)}"
        seen[key] = name
        parents = [visit(nxt) for nxt, _ in fn.next_functions if nxt is not None]
        nodes[name] = NodeDef(name=name, op=fn.name(), input=parents)
        order.append(name)
        return name

    for i, o in enumerate(outputs):
        if isinstance(o, torcia.Tensor) and o.grad_fn is not None:
            last = visit(o.grad_fn)
            name = f"output/{i}"
            nodes[name] = NodeDef(name=name, op="IO Node", input=[last])
            _shape(nodes[name], o)
            order.append(name)
    return GraphDef(node=[nodes[n] for n in order], versions=VersionDef(producer=22))


def _shape(node: NodeDef, tensor) -> None:
    from tensorboard.compat.proto.attr_value_pb2 import AttrValue
    from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto

    node.attr["_output_shapes"].CopyFrom(AttrValue(list=AttrValue.ListValue(shape=[
        TensorShapeProto(dim=[TensorShapeProto.Dim(size=s) for s in tensor.shape])])))
    node.attr["dtype"].CopyFrom(AttrValue(s=str(tensor.dtype).encode()))
