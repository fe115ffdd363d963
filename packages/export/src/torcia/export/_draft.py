"""``torch.export.draft_export``: an export that goes on where :func:`export` stops on
data-dependent control flow, specializing the program on the example's values, and
reports each place it did so."""

from __future__ import annotations

import dataclasses
import enum
import warnings


class FailureType(enum.IntEnum):
    """What a ``FailureReport`` is about (``torch.export._draft_export``'s kinds;
    torcia's capture meets data-dependent reads only)."""

    MISSING_FAKE_KERNEL = 1
    DATA_DEPENDENT_ERROR = 2
    GUARD_ADDED = 3
    MISMATCHED_FAKE_KERNEL = 4

    def __str__(self):
        return self.name


@dataclasses.dataclass
class FailureReport:
    """One place :func:`draft_export` specialized the program: ``failure_type``, and in
    ``data`` the ``message`` and the model's ``user_stack`` line."""

    failure_type: FailureType
    data: dict
    xfail: bool = False

    def print(self, str_to_filename=None) -> str:
        return (f"Data dependent error.\n    {self.data['message']}\n    This occurred at the "
                "following user stacktrace:\n        "
                + self.data["user_stack"].replace("\n", "\n        "))


class DraftExportReport:
    """The failures :func:`draft_export` met (``ep._report``): ``successful()`` when
    there were none, and the program is then as sound as :func:`export`'s.

    Examples
    --------
    >>> import torcia
    >>> ep = torcia.export.draft_export(torcia.nn.ReLU(), (torcia.ones(2),))
    >>> ep._report.successful(), ep._report.failures
    (True, [])
    """

    def __init__(self, failures: list):
        self.failures = failures

    def successful(self) -> bool:
        return not self.failures

    def __str__(self):
        if self.successful():
            return "No issues found during export: the graph is sound.\n"
        items = "\n\n".join(f"{i}. {f.print()}" for i, f in enumerate(self.failures, 1))
        return (f"WARNING: {len(self.failures)} issue(s) found during export, and it was "
                f"not able to soundly produce a graph.\nPlease follow the instructions to fix "
                f"the errors.\n\n{items}\n")


class _DraftRead(UserWarning):
    """How draft_export's capture tells it of a tensor's values read by Python."""


def draft_export(mod, args, kwargs=None, *, dynamic_shapes=None,
                 preserve_module_call_signature: tuple = (), strict: bool = False,
                 pre_dispatch: bool = True, prefer_deferred_runtime_asserts_over_guards=False):
    """:func:`~torcia.export.export` that does not stop on data-dependent control flow
    (``torch.export.draft_export``): where the model's Python reads a tensor's values,
    the values of the example inputs decide, the program keeps that choice (PyTorch's
    also asserts at run time that later inputs make the same one; torcia's does not
    check), and ``ep._report`` (a :class:`DraftExportReport`) lists each such place with the
    model's line. Use it to find everything :func:`export` would refuse in one run.

    Parameters
    ----------
    mod, args, kwargs, dynamic_shapes, preserve_module_call_signature, strict
        As :func:`~torcia.export.export`'s.
    pre_dispatch, prefer_deferred_runtime_asserts_over_guards
        Accepted for PyTorch compatibility (torcia records at the kernels).

    Returns
    -------
    ExportedProgram
        With its report in ``_report``.

    Examples
    --------
    >>> import torcia
    >>> from torcia import nn
    >>> class Net(nn.Module):
    ...     def forward(self, x):
    ...         if x.sum() > 0:
    ...             return x + 1
    ...         return x - 1
    >>> ep = torcia.export.draft_export(Net(), (torcia.ones(3),))
    >>> ep._report.successful(), ep._report.failures[0].failure_type
    (False, <FailureType.DATA_DEPENDENT_ERROR: 2>)
    >>> ep.module()(torcia.ones(3))
    tensor([2., 2., 2.])
    """
    from torcia.export import export

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", _DraftRead)
        ep = export(mod, args, kwargs, dynamic_shapes=dynamic_shapes, strict=strict,
                    preserve_module_call_signature=preserve_module_call_signature,
                    on_data_read=_DraftRead)
    failures = []
    for w in caught:
        if not issubclass(w.category, _DraftRead):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
            continue
        message, _, where = str(w.message).partition(
            "\n\nThe following call raised this error:\n  ")
        failures.append(FailureReport(FailureType.DATA_DEPENDENT_ERROR,
                                      {"message": message, "user_stack": where}))
    ep._report = DraftExportReport(failures)
    return ep
