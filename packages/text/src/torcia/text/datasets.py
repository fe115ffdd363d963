"""Text datasets: lines of files, language-model blocks, labelled CSV/TSV rows, an offline
corpus, and a collate function that pads."""

from __future__ import annotations

import ast
import csv
import sysconfig
from pathlib import Path

import torcia
from torcia.data import Dataset


def read_text(path, encoding="utf-8") -> str:
    """The text of a file; an undecodable byte raises naming the file and the offset.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from torcia.text import read_text
    >>> with tempfile.TemporaryDirectory() as root:
    ...     path = pathlib.Path(root, 'poem.txt')
    ...     _ = path.write_bytes('café'.encode())
    ...     read_text(path)
    'café'
    """
    data = Path(path).read_bytes()
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not valid {encoding} text at byte offset {exc.start} "
                         f"({exc.reason}); pass encoding= if the file uses another "
                         "encoding") from None


class TextLinesDataset(Dataset):
    """The non-empty lines of one or more text files, as strings (or as what ``transform``
    makes of them).

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from torcia.text import TextLinesDataset
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "a.txt"; _ = p.write_text("one\\n\\ntwo\\n")
    >>> list(TextLinesDataset(p))
    ['one', 'two']
    """

    def __init__(self, paths, encoding="utf-8", transform=None, keep_empty=False):
        paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
        self.lines = []
        for p in paths:
            for line in read_text(p, encoding).splitlines():
                if line.strip() or keep_empty:
                    self.lines.append(line)
        self.transform = transform

    def __len__(self):
        return len(self.lines)

    def __getitem__(self, index):
        line = self.lines[index]
        return self.transform(line) if self.transform else line


class LanguageModelDataset(Dataset):
    """A token stream cut into (input, target) blocks of ``block_size``: target is the
    input shifted by one token. ``stride`` (default ``block_size``) is the step between
    block starts.

    Examples
    --------
    >>> from torcia.text import LanguageModelDataset
    >>> ds = LanguageModelDataset(list(range(10)), block_size=4)
    >>> len(ds), ds[1]
    (2, (tensor([4, 5, 6, 7]), tensor([5, 6, 7, 8])))
    """

    def __init__(self, tokens, block_size, stride=None):
        if block_size < 1:
            raise ValueError(f"block_size must be positive, got {block_size}")
        self.tokens = torcia.as_tensor(tokens, dtype=torcia.int64)
        if self.tokens.ndim != 1:
            raise ValueError("tokens must be one stream (1-D), got shape "
                             f"{list(self.tokens.shape)}")
        self.block_size = block_size
        self.stride = stride or block_size
        usable = self.tokens.shape[0] - 1 - block_size
        self._count = usable // self.stride + 1 if usable >= 0 else 0

    def __len__(self):
        return self._count

    def __getitem__(self, index):
        if not -self._count <= index < self._count:
            raise IndexError(f"index {index} is out of range for {self._count} blocks")
        start = (index % self._count) * self.stride
        block = self.tokens[start:start + self.block_size + 1]
        return block[:-1], block[1:]


class CSVClassificationDataset(Dataset):
    """Rows of a CSV/TSV file as (text, label index); labels are indexed in sorted order
    unless ``classes`` is given.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from torcia.text import CSVClassificationDataset
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "d.tsv"
    >>> _ = p.write_text("text\\tlabel\\ngood film\\tpos\\nawful\\tneg\\n")
    >>> ds = CSVClassificationDataset(p, delimiter="\\t")
    >>> ds.classes, ds[0]
    (['neg', 'pos'], ('good film', 1))
    """

    def __init__(self, path, text_column="text", label_column="label", delimiter=None,
                 classes=None, encoding="utf-8", transform=None):
        content = read_text(path, encoding)
        if delimiter is None:
            delimiter = "\t" if str(path).endswith(".tsv") else ","
        reader = csv.DictReader(content.splitlines(), delimiter=delimiter)
        missing = {text_column, label_column} - set(reader.fieldnames or ())
        if missing:
            raise ValueError(f"{path}: no column {sorted(missing)} in header "
                             f"{reader.fieldnames}")
        rows = [(r[text_column], r[label_column]) for r in reader]
        self.classes = list(classes) if classes is not None else sorted({l for _, l in rows})
        index = {c: i for i, c in enumerate(self.classes)}
        self.samples = []
        for line, (text, label) in enumerate(rows, start=2):
            if label not in index:
                raise ValueError(f"{path}, line {line}: label {label!r} is not one of "
                                 f"{self.classes}")
            self.samples.append((text, index[label]))
        self.transform = transform

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        text, label = self.samples[i]
        return (self.transform(text) if self.transform else text), label


def pad_collate(batch, padding_value=0):
    """Collate (token ids, label) pairs: ids padded into one tensor, with ``lengths`` and
    a bool ``mask`` (True on real tokens).

    Examples
    --------
    >>> from torcia.text import pad_collate
    >>> out = pad_collate([([5, 6, 7], 1), ([8], 0)])
    >>> out["input_ids"], out["lengths"], out["labels"]
    (tensor([[5, 6, 7],
            [8, 0, 0]]), tensor([3, 1]), tensor([1, 0]))
    """
    ids = [list(x.tolist() if isinstance(x, torcia.Tensor) else x) for x, _ in batch]
    lengths = [len(x) for x in ids]
    width = max(lengths, default=0)
    padded = [x + [padding_value] * (width - len(x)) for x in ids]
    mask = [[True] * n + [False] * (width - n) for n in lengths]
    return {"input_ids": torcia.tensor(padded, dtype=torcia.int64),
            "lengths": torcia.tensor(lengths), "mask": torcia.tensor(mask),
            "labels": torcia.tensor([y for _, y in batch])}


def python_docs_corpus(max_chars=None) -> str:
    """English prose available on every machine with Python, without a download: the
    docstrings of the standard library's modules, classes and functions (deterministic for
    a Python version), one paragraph per docstring.

    Examples
    --------
    >>> from torcia.text import python_docs_corpus
    >>> text = python_docs_corpus(max_chars=200)
    >>> len(text) <= 200, text == python_docs_corpus(max_chars=200)
    (True, True)
    """
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    parts = []
    total = 0
    for path in sorted(stdlib.glob("*.py")) + sorted(stdlib.glob("*/*.py")):
        if "test" in path.parts[-2:][0] or path.name.startswith("test"):
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, OSError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                 ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node)
                if doc and len(doc) > 80:
                    parts.append(" ".join(doc.split()))
                    total += len(parts[-1]) + 1
        if max_chars is not None and total >= max_chars:
            break
    text = "\n".join(parts)
    return text[:max_chars] if max_chars is not None else text
