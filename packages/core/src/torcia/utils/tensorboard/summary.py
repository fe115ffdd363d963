"""The summaries :class:`~torcia.utils.tensorboard.SummaryWriter` writes, as TensorBoard's
protocol buffers: scalars, tensors, histograms, images (PNG, encoded here), audio (WAV),
text, hyperparameters, precision-recall curves, custom-scalar layouts and meshes, each in
the form TensorBoard's plugins read.
"""

from __future__ import annotations

import io
import json
import struct
import wave
import zlib

import numpy as np
from tensorboard.compat.proto.summary_pb2 import HistogramProto, Summary, SummaryMetadata
from tensorboard.compat.proto.tensor_pb2 import TensorProto
from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto

import torcia

__all__ = [
    "audio", "custom_scalars", "histogram", "histogram_raw", "hparams", "image",
    "image_boxes", "make_histogram", "make_np", "mesh", "pr_curve", "pr_curve_raw", "scalar",
    "tensor_proto", "text",
]


def make_np(x) -> np.ndarray:
    """A NumPy array of a tensor, an array, a number or a list."""
    if isinstance(x, torcia.Tensor):
        return x.detach().cpu().numpy()
    if isinstance(x, np.ndarray):
        return x
    if np.isscalar(x) or isinstance(x, list):
        return np.array(x)
    raise NotImplementedError(f"Got {type(x)}, but numpy array or torcia tensor are expected.")


def _plugin(name: str, content: bytes = b"") -> SummaryMetadata:
    return SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name=name,
                                                                  content=content))


# ----- scalars, tensors, histograms ------------------------------------------------------


def scalar(name, value, new_style=False, double_precision=False) -> Summary:
    """A scalar summary: ``simple_value``, or with ``new_style`` a tensor of the scalars
    plugin (float, or double with ``double_precision``)."""
    arr = make_np(value).squeeze()
    if arr.ndim != 0:
        raise AssertionError(f"Tensor should contain one element (0 dimensions). Was given "
                             f"size: {arr.size} and {arr.ndim} dimensions.")
    v = float(arr)
    if new_style:
        proto = TensorProto(double_val=[v], dtype="DT_DOUBLE") if double_precision else \
            TensorProto(float_val=[v], dtype="DT_FLOAT")
        return Summary(value=[Summary.Value(tag=name, tensor=proto, metadata=_plugin(
            "scalars"))])
    return Summary(value=[Summary.Value(tag=name, simple_value=v)])


#: dtype -> (TensorProto dtype, the field holding the values, the conversion to it)
_TENSOR_FIELDS = {
    "float16": ("DT_HALF", "half_val", lambda a: a.view(np.uint16).astype(np.int32).tolist()),
    "float32": ("DT_FLOAT", "float_val", lambda a: a.tolist()),
    "float64": ("DT_DOUBLE", "double_val", lambda a: a.tolist()),
    "int8": ("DT_INT8", "int_val", lambda a: a.tolist()),
    "uint8": ("DT_UINT8", "int_val", lambda a: a.tolist()),
    "int16": ("DT_INT16", "int_val", lambda a: a.tolist()),
    "int32": ("DT_INT32", "int_val", lambda a: a.tolist()),
    "int64": ("DT_INT64", "int64_val", lambda a: a.tolist()),
    "bool": ("DT_BOOL", "bool_val", lambda a: a.tolist()),
    "complex64": ("DT_COMPLEX64", "scomplex_val",
                  lambda a: np.stack([a.real, a.imag], -1).reshape(-1).tolist()),
    "complex128": ("DT_COMPLEX128", "dcomplex_val",
                   lambda a: np.stack([a.real, a.imag], -1).reshape(-1).tolist()),
}


def tensor_proto(tag, tensor) -> Summary:
    """A whole tensor (the tensor plugin's summary)."""
    arr = make_np(tensor)
    if arr.nbytes >= 1 << 31:
        raise ValueError("tensor is bigger than protocol buffer's hard limit of 2GB in size")
    if arr.dtype.name not in _TENSOR_FIELDS:
        raise ValueError(f"{tag} has unsupported tensor dtype {arr.dtype}")
    dtype, field, convert = _TENSOR_FIELDS[arr.dtype.name]
    proto = TensorProto(dtype=dtype, tensor_shape=TensorShapeProto(
        dim=[TensorShapeProto.Dim(size=s) for s in arr.shape]),
        **{field: convert(arr.reshape(-1))})
    return Summary(value=[Summary.Value(tag=tag, metadata=_plugin("tensor"), tensor=proto)])


def histogram_raw(name, min, max, num, sum, sum_squares, bucket_limits,  # noqa: A002
                  bucket_counts) -> Summary:
    """A histogram from its statistics and buckets."""
    return Summary(value=[Summary.Value(tag=name, histo=HistogramProto(
        min=min, max=max, num=num, sum=sum, sum_squares=sum_squares,
        bucket_limit=bucket_limits, bucket=bucket_counts))])


def histogram(name, values, bins, max_bins=None) -> Summary:
    """A histogram of ``values`` with NumPy's ``bins`` (at most ``max_bins``)."""
    return Summary(value=[Summary.Value(tag=name, histo=make_histogram(
        make_np(values).astype(float), bins, max_bins))])


def make_histogram(values, bins, max_bins=None) -> HistogramProto:
    """The histogram proto of ``values``: NumPy's counts, at most ``max_bins`` buckets (by
    merging neighbours), trimmed to the buckets from the first to the last nonempty one."""
    if values.size == 0:
        raise ValueError("The input has no element.")
    values = values.reshape(-1)
    counts, limits = np.histogram(values, bins=bins)
    if max_bins is not None and len(counts) > max_bins:
        step = len(counts) // max_bins
        if len(counts) % step:
            counts = np.pad(counts, (0, step - len(counts) % step))
        counts = counts.reshape(-1, step).sum(-1)
        limits = np.concatenate([limits[:-1:step], limits[-1:]])
    nonempty = np.flatnonzero(counts)
    first, last = int(nonempty[0]), int(nonempty[-1])
    # TensorBoard reads a bucket's limit as its right edge: one empty bucket before the
    # first, so that the first nonempty one has a left edge
    counts = np.concatenate([[0], counts[: last + 1]]) if first == 0 else \
        counts[first - 1: last + 1]
    limits = limits[first: last + 2]
    return HistogramProto(min=values.min(), max=values.max(), num=len(values),
                          sum=values.sum(), sum_squares=values.dot(values),
                          bucket_limit=limits.tolist(), bucket=counts.tolist())


# ----- images, audio ----------------------------------------------------------------------


def _png(rgb: np.ndarray) -> bytes:
    """An 8-bit PNG of an ``(H, W, C)`` uint8 array (C of 1, 3 or 4)."""
    h, w, c = rgb.shape
    color = {1: 0, 3: 2, 4: 6}[c]
    rows = np.concatenate([np.zeros((h, 1), np.uint8), rgb.reshape(h, w * c)], 1)

    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, color, 0,
                                                               0, 0))
            + chunk(b"IDAT", zlib.compress(rows.tobytes(), 6)) + chunk(b"IEND", b""))


def make_grid(images: np.ndarray, ncols: int = 8) -> np.ndarray:
    """``(N, C, H, W)`` images tiled into one ``(3, H', W')`` image, ``ncols`` a row."""
    if images.shape[1] == 1:
        images = np.concatenate([images] * 3, 1)
    if images.shape[1] not in (3, 4):
        raise AssertionError("images must have 1, 3 or 4 channels")
    n, c, h, w = images.shape
    ncols = min(n, ncols)
    nrows = -(-n // ncols)
    canvas = np.zeros((c, h * nrows, w * ncols), dtype=images.dtype)
    for i in range(n):
        r, col = divmod(i, ncols)
        canvas[:, r * h:(r + 1) * h, col * w:(col + 1) * w] = images[i]
    return canvas


def convert_to_HWC(arr: np.ndarray, dataformats: str) -> np.ndarray:  # noqa: N802
    """An image (or a batch, tiled) in ``dataformats`` (``"NCHW"``, ``"CHW"``, ``"HWC"``,
    ``"HW"``...) as ``(H, W, C)``."""
    fmt = dataformats.upper()
    if len(set(fmt)) != len(fmt):
        raise AssertionError(f"You can not use the same dimension shorthand twice. "
                             f"input_format: {dataformats}")
    if arr.ndim != len(fmt):
        raise AssertionError(f"size of input tensor and input format are different. tensor "
                             f"shape: {arr.shape}, input_format: {dataformats}")
    if len(fmt) == 4:
        return make_grid(arr.transpose([fmt.find(c) for c in "NCHW"])).transpose(1, 2, 0)
    if len(fmt) == 3:
        hwc = arr.transpose([fmt.find(c) for c in "HWC"])
        return np.concatenate([hwc] * 3, 2) if hwc.shape[2] == 1 else hwc
    return np.stack([arr.transpose([fmt.find(c) for c in "HW"])] * 3, 2)


def _to_uint8(hwc: np.ndarray) -> np.ndarray:
    # floats in [0, 1] scale to [0, 255]; uint8 images are as they are
    scale = 1 if hwc.dtype == np.uint8 else 255
    return (hwc.astype(np.float32) * scale).clip(0, 255).astype(np.uint8)


def _draw_boxes(hwc: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    """Red outlines of ``(x_min, y_min, x_max, y_max)`` boxes (two pixels wide)."""
    out = hwc.copy()
    h, w = out.shape[:2]
    red = np.array([255, 0, 0] + [255] * (out.shape[2] - 3), dtype=np.uint8)
    for x0, y0, x1, y1 in np.round(boxes).astype(int):
        x0, x1 = sorted((max(0, min(w - 1, x0)), max(0, min(w - 1, x1))))
        y0, y1 = sorted((max(0, min(h - 1, y0)), max(0, min(h - 1, y1))))
        out[y0:y0 + 2, x0:x1 + 1] = out[max(y1 - 1, y0):y1 + 1, x0:x1 + 1] = red
        out[y0:y1 + 1, x0:x0 + 2] = out[y0:y1 + 1, max(x1 - 1, x0):x1 + 1] = red
    return out


def _image_proto(hwc_uint8: np.ndarray) -> Summary.Image:
    h, w, c = hwc_uint8.shape
    return Summary.Image(height=h, width=w, colorspace=c,
                         encoded_image_string=_png(hwc_uint8))


def image(tag, tensor, rescale=1, dataformats="NCHW") -> Summary:
    """An image (a batch is tiled into one) as PNG."""
    if rescale != 1:
        raise NotImplementedError("image(rescale=...) is not supported by torcia; resize the "
                                  "image before logging it")
    hwc = _to_uint8(convert_to_HWC(make_np(tensor), dataformats))
    return Summary(value=[Summary.Value(tag=tag, image=_image_proto(hwc))])


def image_boxes(tag, tensor_image, tensor_boxes, rescale=1, dataformats="CHW",
                labels=None) -> Summary:
    """An image with boxes ``(N, 4)`` drawn on it."""
    hwc = _to_uint8(convert_to_HWC(make_np(tensor_image), dataformats))
    hwc = _draw_boxes(hwc, make_np(tensor_boxes).reshape(-1, 4))
    return Summary(value=[Summary.Value(tag=tag, image=_image_proto(hwc))])


def audio(tag, tensor, sample_rate=44100) -> Summary:
    """Mono audio in [-1, 1] as 16-bit WAV."""
    arr = make_np(tensor).squeeze()
    if arr.ndim != 1:
        raise AssertionError("input tensor should be 1 dimensional.")
    arr = (arr.clip(-1, 1) * np.iinfo(np.int16).max).astype("<i2")
    buf = io.BytesIO()
    with wave.open(buf, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(sample_rate)
        out.writeframes(arr.tobytes())
    return Summary(value=[Summary.Value(tag=tag, audio=Summary.Audio(
        sample_rate=sample_rate, num_channels=1, length_frames=arr.shape[-1],
        encoded_audio_string=buf.getvalue(), content_type="audio/wav"))])


# ----- text, hyperparameters, curves, layouts, meshes ---------------------------------


def text(tag, text_string) -> Summary:
    """A string (markdown) for the text plugin."""
    from tensorboard.plugins.text.plugin_data_pb2 import TextPluginData

    content = TextPluginData(version=0).SerializeToString()
    proto = TensorProto(dtype="DT_STRING", string_val=[text_string.encode("utf-8")],
                        tensor_shape=TensorShapeProto(dim=[TensorShapeProto.Dim(size=1)]))
    return Summary(value=[Summary.Value(tag=tag + "/text_summary",
                                        metadata=_plugin("text", content), tensor=proto)])


def hparams(hparam_dict=None, metric_dict=None, hparam_domain_discrete=None):
    """The three summaries of the hparams plugin for one run: the experiment (the
    hyperparameters' names, types and discrete domains, and the metrics' tags), the
    session start (the values) and the session end."""
    from google.protobuf import struct_pb2
    from tensorboard.plugins.hparams.api_pb2 import (
        DataType,
        Experiment,
        HParamInfo,
        MetricInfo,
        MetricName,
        Status,
    )
    from tensorboard.plugins.hparams.metadata import (
        EXPERIMENT_TAG,
        PLUGIN_DATA_VERSION,
        PLUGIN_NAME,
        SESSION_END_INFO_TAG,
        SESSION_START_INFO_TAG,
    )
    from tensorboard.plugins.hparams.plugin_data_pb2 import (
        HParamsPluginData,
        SessionEndInfo,
        SessionStartInfo,
    )

    if not isinstance(hparam_dict, dict):
        raise TypeError("parameter: hparam_dict should be a dictionary, nothing logged.")
    if not isinstance(metric_dict, dict):
        raise TypeError("parameter: metric_dict should be a dictionary, nothing logged.")
    domains = hparam_domain_discrete or {}
    if not isinstance(domains, dict):
        raise TypeError("parameter: hparam_domain_discrete should be a dictionary, nothing "
                        "logged.")
    for k, v in domains.items():
        if k not in hparam_dict or not isinstance(v, list) or not all(
                isinstance(d, type(hparam_dict[k])) for d in v):
            raise TypeError(f"parameter: hparam_domain_discrete[{k}] should be a list of same "
                            f"type as hparam_dict[{k}].")
    start = SessionStartInfo()
    infos = []
    for k, v in hparam_dict.items():
        if v is None:
            continue
        if isinstance(v, torcia.Tensor):
            v = float(make_np(v).reshape(-1)[0])
        # a bool is an int to Python, and PyTorch logs it as a number (1.0 or 0.0)
        if isinstance(v, (int, float)):
            start.hparams[k].number_value = v
            kind, field = "DATA_TYPE_FLOAT64", "number_value"
        elif isinstance(v, str):
            start.hparams[k].string_value = v
            kind, field = "DATA_TYPE_STRING", "string_value"
        else:
            raise ValueError("value should be one of int, float, str, bool, or torcia.Tensor")
        discrete = struct_pb2.ListValue(values=[struct_pb2.Value(**{field: d})
                                                for d in domains[k]]) if k in domains else None
        infos.append(HParamInfo(name=k, type=DataType.Value(kind), domain_discrete=discrete))

    def summary(tag, **content):
        data = HParamsPluginData(version=PLUGIN_DATA_VERSION, **content).SerializeToString()
        return Summary(value=[Summary.Value(tag=tag, metadata=_plugin(PLUGIN_NAME, data))])

    experiment = Experiment(hparam_infos=infos,
                            metric_infos=[MetricInfo(name=MetricName(tag=k))
                                          for k in metric_dict])
    return (summary(EXPERIMENT_TAG, experiment=experiment),
            summary(SESSION_START_INFO_TAG, session_start_info=start),
            summary(SESSION_END_INFO_TAG, session_end_info=SessionEndInfo(
                status=Status.Value("STATUS_SUCCESS"))))


def pr_curve_raw(tag, tp, fp, tn, fn, precision, recall, num_thresholds=127,
                 weights=None) -> Summary:
    """A precision-recall curve from its counts per threshold."""
    from tensorboard.plugins.pr_curve.plugin_data_pb2 import PrCurvePluginData

    num_thresholds = min(num_thresholds, 127)
    data = np.stack((tp, fp, tn, fn, precision, recall))
    content = PrCurvePluginData(version=0, num_thresholds=num_thresholds).SerializeToString()
    proto = TensorProto(dtype="DT_FLOAT", float_val=data.reshape(-1).tolist(),
                        tensor_shape=TensorShapeProto(dim=[TensorShapeProto.Dim(
                            size=s) for s in data.shape]))
    return Summary(value=[Summary.Value(tag=tag, metadata=_plugin("pr_curves", content),
                                        tensor=proto)])


def pr_curve(tag, labels, predictions, num_thresholds=127, weights=None) -> Summary:
    """A precision-recall curve of binary ``labels`` and ``predictions`` in [0, 1]."""
    num_thresholds = min(num_thresholds, 127)
    labels, predictions = make_np(labels), make_np(predictions)
    weights = 1.0 if weights is None else make_np(weights)
    buckets = np.floor(predictions * (num_thresholds - 1)).astype(np.int32)
    true_counts = np.bincount(buckets.reshape(-1), (labels * weights).reshape(-1),
                              minlength=num_thresholds)
    false_counts = np.bincount(buckets.reshape(-1), ((1 - labels) * weights).reshape(-1),
                               minlength=num_thresholds)
    tp = np.cumsum(true_counts[::-1])[::-1]
    fp = np.cumsum(false_counts[::-1])[::-1]
    tn, fn = fp[0] - fp, tp[0] - tp
    precision = tp / np.maximum(1e-7, tp + fp)
    recall = tp / np.maximum(1e-7, tp + fn)
    return pr_curve_raw(tag, tp, fp, tn, fn, precision, recall, num_thresholds)


def custom_scalars(layout) -> Summary:
    """The custom-scalars plugin's layout: ``{category: {chart: ["Multiline", [tags]] or
    ["Margin", [value, lower, upper]]}}``."""
    from tensorboard.plugins.custom_scalar import layout_pb2

    categories = []
    for title, charts in layout.items():
        made = []
        for chart_name, (kind, tags) in charts.items():
            if kind == "Margin":
                if len(tags) != 3:
                    raise AssertionError("len(tags) != 3")
                made.append(layout_pb2.Chart(title=chart_name, margin=layout_pb2.MarginChartContent(
                    series=[layout_pb2.MarginChartContent.Series(value=tags[0], lower=tags[1],
                                                                  upper=tags[2])])))
            else:
                made.append(layout_pb2.Chart(title=chart_name,
                                             multiline=layout_pb2.MultilineChartContent(
                                                 tag=tags)))
        categories.append(layout_pb2.Category(title=title, chart=made))
    proto = TensorProto(dtype="DT_STRING", string_val=[layout_pb2.Layout(
        category=categories).SerializeToString()], tensor_shape=TensorShapeProto())
    return Summary(value=[Summary.Value(tag="custom_scalars__config__",
                                        metadata=_plugin("custom_scalars"), tensor=proto)])


def mesh(tag, vertices, colors, faces, config_dict, display_name=None, description=None):
    """The mesh plugin's summaries of a 3-D mesh (vertices, and optionally faces and
    colors), each a float tensor with the plugin's metadata."""
    from tensorboard.plugins.mesh import metadata as mesh_metadata
    from tensorboard.plugins.mesh.plugin_data_pb2 import MeshPluginData

    json_config = "{}" if config_dict is None else json.dumps(config_dict, sort_keys=True)
    parts = [(t, kind) for t, kind in ((vertices, MeshPluginData.VERTEX),
                                       (faces, MeshPluginData.FACE),
                                       (colors, MeshPluginData.COLOR)) if t is not None]
    components = mesh_metadata.get_components_bitmask([kind for _, kind in parts])
    values = []
    for tensor, kind in parts:
        arr = make_np(tensor)
        meta = mesh_metadata.create_summary_metadata(tag, display_name, kind, components,
                                                     arr.shape, description,
                                                     json_config=json_config)
        proto = TensorProto(dtype="DT_FLOAT", float_val=arr.reshape(-1).tolist(),
                            tensor_shape=TensorShapeProto(dim=[
                                TensorShapeProto.Dim(size=s) for s in arr.shape]))
        values.append(Summary.Value(tag=mesh_metadata.get_instance_name(tag, kind),
                                    tensor=proto, metadata=meta))
    return Summary(value=values)
