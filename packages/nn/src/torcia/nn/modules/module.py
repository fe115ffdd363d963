"""``Module``: the base of every layer and model.

A module registers what is assigned to it as an attribute: a :class:`Parameter` becomes a
parameter, a :class:`Module` a submodule, a tensor assigned over a registered buffer stays a
buffer. Registered things live in three ordered dicts (``_parameters``, ``_buffers``,
``_modules``); :meth:`Module.__getattr__` only runs when normal lookup fails, so reading
plain attributes costs nothing extra.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict, namedtuple

from torcia import Tensor, no_grad
from torcia.library import RemovableHandle, dtype_by_name, parse_to, share_memory, zero_grad
from torcia.nn.parameter import Buffer, Parameter

__all__ = ["Module", "RemovableHandle"]


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What :meth:`Module.load_state_dict` returns."""

    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


def _addindent(text: str, spaces: int) -> str:
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    pad = " " * spaces
    return lines[0] + "\n" + "\n".join(pad + line for line in lines[1:])


def _forward_unimplemented(self, *input):
    raise NotImplementedError(
        f'Module [{type(self).__name__}] is missing the required "forward" function'
    )


class Module:
    """Base class of all neural-network modules.

    Subclass it, create parameters and submodules in ``__init__`` (after calling
    ``super().__init__()``), and compute the output in ``forward``; call the module itself,
    not ``forward``, so that hooks run.

    Examples
    --------
    >>> import torcia
    >>> from torcia import nn
    >>> class Net(nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.fc = nn.Linear(3, 2)
    ...     def forward(self, x):
    ...         return self.fc(x).relu()
    >>> net = Net()
    >>> [name for name, _ in net.named_parameters()]
    ['fc.weight', 'fc.bias']
    >>> net(torcia.ones(4, 3)).shape
    torcia.Size([4, 2])
    """

    training: bool
    forward = _forward_unimplemented

    def __init__(self, *args, **kwargs):
        if args or kwargs:
            raise TypeError(
                f"{type(self).__name__}.__init__() got unexpected arguments: "
                f"{args!r}, {kwargs!r}"
            )
        setter = object.__setattr__
        setter(self, "training", True)
        setter(self, "_parameters", OrderedDict())
        setter(self, "_buffers", OrderedDict())
        setter(self, "_non_persistent_buffers_set", set())
        setter(self, "_modules", OrderedDict())
        setter(self, "_forward_pre_hooks", OrderedDict())
        setter(self, "_forward_pre_hooks_with_kwargs", set())
        setter(self, "_forward_hooks", OrderedDict())
        setter(self, "_forward_hooks_with_kwargs", set())
        setter(self, "_forward_hooks_always_called", set())
        setter(self, "_backward_hooks", OrderedDict())
        setter(self, "_backward_pre_hooks", OrderedDict())

    # ----- registration -----------------------------------------------------------------
    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Add a parameter (or None, a declared but absent one, like a disabled bias)."""
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        _check_name(name, "parameter")
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(
                f"cannot assign '{_type_name(param)}' object to parameter '{name}' "
                "(torcia.nn.Parameter or None required)"
            )
        if param is not None and param.grad_fn is not None:
            raise ValueError(
                f"Cannot assign non-leaf Tensor to parameter '{name}'. Model parameters must "
                f"be created explicitly. To express '{name}' as a function of another Tensor, "
                "compute the value in the forward() method."
            )
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True):
        """Add a buffer: state that is not a parameter (running statistics, say).

        A persistent buffer is part of ``state_dict``; a non-persistent one only moves with
        the module.
        """
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        _check_name(name, "buffer")
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(
                f"cannot assign '{_type_name(tensor)}' object to buffer '{name}' "
                "(torcia Tensor or None required)"
            )
        if isinstance(tensor, Buffer):
            tensor = Tensor.detach(tensor)
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name: str, module: Module | None) -> None:
        """Add a child module, reachable as the attribute ``name``."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{_type_name(module)} is not a Module subclass")
        _check_name(name, "module")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        self._modules[name] = module

    register_module = add_module

    def get_submodule(self, target: str) -> Module:
        """The submodule at a dotted path such as ``"features.0"``."""
        mod = self
        if target == "":
            return mod
        for item in target.split("."):
            if not hasattr(mod, item):
                raise AttributeError(f"{mod._get_name()} has no attribute `{item}`")
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError(f"`{item}` is not an nn.Module")
        return mod

    def get_parameter(self, target: str) -> Parameter:
        module_path, _, name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if name not in mod._parameters:
            raise AttributeError(f"{mod._get_name()} has no parameter `{name}`")
        return mod._parameters[name]

    def get_buffer(self, target: str) -> Tensor:
        module_path, _, name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if name not in mod._buffers:
            raise AttributeError(f"{mod._get_name()} has no buffer `{name}`")
        return mod._buffers[name]

    # ----- attribute protocol -------------------------------------------------------
    def __getattr__(self, name: str):
        # only reached when ordinary lookup fails: registered things live in the dicts
        d = self.__dict__
        for store in _STORE_NAMES:
            table = d.get(store)
            if table is not None and name in table:
                return table[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name: str, value) -> None:
        d = self.__dict__
        for store, marker, what, reassignable, expected, register in _STORES:
            table = d.get(store)
            if isinstance(value, marker):
                if table is None:
                    raise AttributeError(f"cannot assign {what} before Module.__init__() call")
                _discard(d, name, *(s for s in _STORE_NAMES if s != store))
                d.pop(name, None)
                register(self, name, value)
                return
            if table is not None and name in table:
                if value is not None and not isinstance(value, reassignable):
                    raise TypeError(
                        f"cannot assign '{_type_name(value)}' as {what} '{name}' "
                        f"({expected} or None expected)"
                    )
                table[name] = value
                return
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        for store in _STORE_NAMES:
            table = self.__dict__[store]
            if name in table:
                del table[name]
                self._non_persistent_buffers_set.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        keys = itertools.chain(super().__dir__(), self._parameters, self._buffers,
                               self._modules)
        return sorted(k for k in set(keys) if not k[0].isdigit())

    def __setstate__(self, state):
        self.__dict__.update(state)

    # ----- calling ------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        if not (self._forward_pre_hooks or self._forward_hooks or self._backward_hooks
                or self._backward_pre_hooks or _GLOBAL_HOOKS):
            return self.forward(*args, **kwargs)
        return self._call_with_hooks(args, kwargs)

    def _call_with_hooks(self, args, kwargs):
        for hook_id, hook in itertools.chain(_GLOBAL_TABLES["forward_pre"].items(),
                                             self._forward_pre_hooks.items()):
            if hook_id in self._forward_pre_hooks_with_kwargs:
                result = hook(self, args, kwargs)
                if result is not None:
                    if not (isinstance(result, tuple) and len(result) == 2):
                        raise RuntimeError(
                            "forward pre-hook must return None or a tuple of (new_args, "
                            f"new_kwargs), but got {result}."
                        )
                    args, kwargs = result
            else:
                result = hook(self, args)
                if result is not None:
                    args = result if isinstance(result, tuple) else (result,)
        backward_hook = None
        if self._backward_hooks or self._backward_pre_hooks:
            from torcia.nn.modules._backward_hook import BackwardHook

            backward_hook = BackwardHook(self)
            args = backward_hook.setup_input_hook(args)
        try:
            output = self.forward(*args, **kwargs)
        except BaseException:
            # hooks registered with always_call=True still see the call, with output None
            for hook_id, hook in self._forward_hooks.items():
                if hook_id in self._forward_hooks_always_called:
                    self._run_forward_hook(hook_id, hook, args, kwargs, None)
            raise
        for hook_id, hook in itertools.chain(_GLOBAL_TABLES["forward"].items(),
                                             self._forward_hooks.items()):
            result = self._run_forward_hook(hook_id, hook, args, kwargs, output)
            if result is not None:
                output = result
        if backward_hook is not None:
            output = backward_hook.setup_output_hook(output)
        return output

    def _run_forward_hook(self, hook_id, hook, args, kwargs, output):
        if hook_id in self._forward_hooks_with_kwargs:
            return hook(self, args, kwargs, output)
        return hook(self, args, output)

    # ----- hooks --------------------------------------------------------------------
    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """Call ``hook(module, args)`` before ``forward``; it may return new args.

        With ``with_kwargs=True`` the hook is ``hook(module, args, kwargs)`` and may return
        ``(args, kwargs)``.
        """
        handle = RemovableHandle(self._forward_pre_hooks,
                                 extra_dict=self._forward_pre_hooks_with_kwargs)
        _insert(self._forward_pre_hooks, handle.id, hook, prepend)
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs.add(handle.id)
        return handle

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False,
                              always_call=False):
        """Call ``hook(module, args, output)`` after ``forward``; it may return a new output.

        With ``with_kwargs=True`` the hook is ``hook(module, args, kwargs, output)``; with
        ``always_call=True`` it also runs, with output None, when ``forward`` raises.
        """
        handle = RemovableHandle(self._forward_hooks, extra_dict=(
            self._forward_hooks_with_kwargs, self._forward_hooks_always_called))
        _insert(self._forward_hooks, handle.id, hook, prepend)
        if with_kwargs:
            self._forward_hooks_with_kwargs.add(handle.id)
        if always_call:
            self._forward_hooks_always_called.add(handle.id)
        return handle

    def register_full_backward_hook(self, hook, prepend=False):
        """Call ``hook(module, grad_input, grad_output)`` when the gradients with respect to
        the module's inputs have been computed.

        ``grad_input`` and ``grad_output`` are tuples with one entry per tensor input and
        output (None where there is no gradient). The hook may return a new ``grad_input``.

        Examples
        --------
        >>> import torcia
        >>> lin = torcia.nn.Linear(2, 1)
        >>> seen = []
        >>> _ = lin.register_full_backward_hook(lambda m, gi, go: seen.append(go[0].shape))
        >>> lin(torcia.ones(3, 2, requires_grad=True)).sum().backward()
        >>> seen
        [torcia.Size([3, 1])]
        """
        handle = RemovableHandle(self._backward_hooks)
        _insert(self._backward_hooks, handle.id, hook, prepend)
        return handle

    def register_full_backward_pre_hook(self, hook, prepend=False):
        """Call ``hook(module, grad_output)`` when the gradients with respect to the module's
        outputs have been computed, before those with respect to its inputs; it may return
        a new ``grad_output``."""
        handle = RemovableHandle(self._backward_pre_hooks)
        _insert(self._backward_pre_hooks, handle.id, hook, prepend)
        return handle

    # ----- iteration ----------------------------------------------------------------
    def _named_members(self, get_members, prefix="", recurse=True, remove_duplicate=True):
        seen = set()
        modules = (self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
                   if recurse else [(prefix, self)])
        for module_prefix, module in modules:
            for name, value in get_members(module):
                if value is None or (remove_duplicate and id(value) in seen):
                    continue
                if remove_duplicate:
                    seen.add(id(value))
                yield (module_prefix + ("." if module_prefix else "") + name, value)

    def parameters(self, recurse: bool = True):
        """Iterate over the parameters (of submodules too unless ``recurse=False``), each
        once even when shared."""
        # the optimizer's loop calls this every step: no dotted names are built here
        seen = set()
        for module in (self.modules() if recurse else (self,)):
            for param in module._parameters.values():
                if param is not None and id(param) not in seen:
                    seen.add(id(param))
                    yield param

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True):
        """Iterate over ``(dotted_name, parameter)`` pairs."""
        return self._named_members(lambda m: m._parameters.items(), prefix, recurse,
                                   remove_duplicate)

    def buffers(self, recurse: bool = True):
        """Iterate over the buffers."""
        for _, buf in self.named_buffers(recurse=recurse):
            yield buf

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True):
        """Iterate over ``(dotted_name, buffer)`` pairs."""
        return self._named_members(lambda m: m._buffers.items(), prefix, recurse,
                                   remove_duplicate)

    def children(self):
        """Iterate over the direct submodules."""
        for _, module in self.named_children():
            yield module

    def named_children(self):
        """Iterate over ``(name, module)`` of the direct submodules, each once."""
        seen = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in seen:
                seen.add(id(module))
                yield name, module

    def modules(self):
        """Iterate over every module of the tree, this one first, each once."""
        seen = set()
        stack = [self]
        while stack:
            module = stack.pop()
            # marked when visited, not when pushed: the order is named_modules' depth-first
            if id(module) in seen:
                continue
            seen.add(id(module))
            yield module
            stack.extend(m for m in reversed(module._modules.values()) if m is not None)

    def named_modules(self, memo=None, prefix: str = "", remove_duplicate: bool = True):
        """Iterate over ``(dotted_name, module)`` of the tree in depth-first order."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            sub_prefix = prefix + ("." if prefix else "") + name
            yield from module.named_modules(memo, sub_prefix, remove_duplicate)

    # ----- modes and gradients --------------------------------------------------------
    def train(self, mode: bool = True) -> Module:
        """Set training mode (dropout active, batch statistics used) on the whole tree."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for module in self.children():
            module.train(mode)
        return self

    def eval(self) -> Module:
        """Set evaluation mode: ``train(False)``."""
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        """Set ``requires_grad`` on every parameter."""
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of every parameter: to None by default, else to zeros."""
        zero_grad(self.parameters(), set_to_none)

    # ----- conversion ---------------------------------------------------------------
    def _apply(self, fn, recurse: bool = True) -> Module:
        """Replace every parameter's and buffer's data with ``fn(data)``; the Parameter
        objects stay the same, so optimizers that hold them keep working."""
        if recurse:
            for module in self.children():
                module._apply(fn)
        with no_grad():
            for param in self._parameters.values():
                if param is None:
                    continue
                new = fn(param)
                if new is not param:
                    param.data = new
                if param.grad is not None:
                    new_grad = fn(param.grad)
                    if new_grad is not param.grad:
                        param.grad.data = new_grad
            for name, buf in self._buffers.items():
                if buf is not None:
                    self._buffers[name] = fn(buf)
        return self

    def apply(self, fn) -> Module:
        """Call ``fn(module)`` on every submodule (children first) and on this one.

        Examples
        --------
        >>> import torcia
        >>> from torcia import nn
        >>> net = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 1))
        >>> def init(m):
        ...     if isinstance(m, nn.Linear):
        ...         nn.init.zeros_(m.weight)
        >>> float(net.apply(init)[1].weight.abs().sum())
        0.0
        """
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    def to(self, *args, **kwargs) -> Module:
        """Move and/or cast parameters and buffers: ``to(device)``, ``to(dtype)``,
        ``to(device, dtype)``, ``to(tensor)``. Only floating-point tensors change dtype.
        Works in place and returns the module."""
        device, dtype, _, _ = parse_to(*args, **kwargs)
        if dtype is not None and not dtype.is_floating_point:
            raise TypeError(
                "nn.Module.to only accepts floating point or complex dtypes, but got desired "
                f"dtype={dtype}"
            )

        def convert(t):
            return t.to(device, dtype if t.is_floating_point() else None)

        return self._apply(convert)

    def cpu(self) -> Module:
        return self._apply(lambda t: t.cpu())

    def cuda(self, device=None) -> Module:
        return self._apply(lambda t: t.cuda(device))

    def type(self, dst_type) -> Module:
        return self._apply(lambda t: t.to(dst_type))

    def float(self) -> Module:
        """Cast floating-point parameters and buffers to float32."""
        return self._cast("float32")

    def double(self) -> Module:
        """Cast floating-point parameters and buffers to float64."""
        return self._cast("float64")

    def half(self) -> Module:
        """Cast floating-point parameters and buffers to float16."""
        return self._cast("float16")

    def bfloat16(self) -> Module:
        """Cast floating-point parameters and buffers to bfloat16."""
        return self._cast("bfloat16")

    def _cast(self, name):
        target = dtype_by_name(name)
        return self._apply(lambda t: t.to(target) if t.is_floating_point() else t)

    # ----- state dict ---------------------------------------------------------------
    def get_extra_state(self):
        """State beyond parameters and buffers to put in ``state_dict`` under
        ``_extra_state`` (override it together with :meth:`set_extra_state`; it must be
        something :func:`torcia.save` can store)."""
        raise RuntimeError(
            "Reached a code path in Module.get_extra_state() that should never be called. "
            "Override get_extra_state() in the module to return its extra state."
        )

    def set_extra_state(self, state) -> None:
        """Restore what :meth:`get_extra_state` returned."""
        raise RuntimeError(
            "Reached a code path in Module.set_extra_state() that should never be called. "
            "Override set_extra_state() in the module to restore its extra state."
        )

    def _has_extra_state(self, method: str) -> bool:
        return getattr(type(self), method) is not getattr(Module, method)

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        for name, param in self._parameters.items():
            if param is not None:
                destination[prefix + name] = param if keep_vars else param.detach()
        for name, buf in self._buffers.items():
            if buf is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = buf if keep_vars else buf.detach()
        if self._has_extra_state("get_extra_state"):
            destination[prefix + _EXTRA_STATE] = self.get_extra_state()

    def state_dict(self, *args, destination=None, prefix: str = "", keep_vars: bool = False):
        """An ordered dict from dotted names to the parameters and persistent buffers.

        The values share storage with the module (detached, unless ``keep_vars``).

        Examples
        --------
        >>> import torcia
        >>> list(torcia.nn.BatchNorm1d(3).state_dict())
        ['weight', 'bias', 'running_mean', 'running_var', 'num_batches_tracked']
        """
        if args:
            # PyTorch's deprecated positional form: (destination, prefix, keep_vars)
            destination = args[0]
            prefix = args[1] if len(args) > 1 else prefix
            keep_vars = args[2] if len(args) > 2 else keep_vars
        if destination is None:
            destination = OrderedDict()
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination=destination, prefix=prefix + name + ".",
                                  keep_vars=keep_vars)
        return destination

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict,
                              missing_keys, unexpected_keys, error_msgs):
        persistent_buffers = {k: v for k, v in self._buffers.items()
                              if k not in self._non_persistent_buffers_set}
        local_state = {k: v for k, v in itertools.chain(self._parameters.items(),
                                                        persistent_buffers.items())
                       if v is not None}
        for name, current in local_state.items():
            key = prefix + name
            if key not in state_dict:
                if strict:
                    missing_keys.append(key)
                continue
            value = state_dict[key]
            if not isinstance(value, Tensor):
                error_msgs.append(
                    f'While copying the parameter named "{key}", expected torcia.Tensor or '
                    f"Tensor-like object from checkpoint but received {type(value)}"
                )
                continue
            if value.shape != current.shape:
                error_msgs.append(
                    f"size mismatch for {key}: copying a param with shape {value.shape} from "
                    f"checkpoint, the shape in current model is {current.shape}."
                )
                continue
            try:
                with no_grad():
                    current.copy_(value)
            except Exception as exc:  # noqa: BLE001 - reported with the key, like PyTorch
                error_msgs.append(
                    f'While copying the parameter named "{key}", whose dimensions in the model '
                    f"are {current.shape} and whose dimensions in the checkpoint are "
                    f"{value.shape}, an exception occurred : {exc.args}."
                )
        extra = self._has_extra_state("set_extra_state")
        if extra:
            if prefix + _EXTRA_STATE in state_dict:
                self.set_extra_state(state_dict[prefix + _EXTRA_STATE])
            elif strict:
                missing_keys.append(prefix + _EXTRA_STATE)
        if strict:
            for key in state_dict:
                if not key.startswith(prefix):
                    continue
                rest = key[len(prefix):]
                head = rest.split(".", 1)[0]
                known = rest in local_state or (extra and rest == _EXTRA_STATE)
                if head not in self._modules and not known:
                    unexpected_keys.append(key)

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """Copy parameters and buffers from ``state_dict`` into this module.

        With ``strict=True`` (the default) the keys must match :meth:`state_dict`'s exactly;
        a shape mismatch is always an error. Every problem is reported at once, each naming
        its key. With ``assign=True`` the module takes the given tensors instead of copying
        into its own.

        Returns
        -------
        NamedTuple
            ``(missing_keys, unexpected_keys)``.

        Examples
        --------
        >>> import torcia
        >>> a, b = torcia.nn.Linear(2, 2), torcia.nn.Linear(2, 2)
        >>> b.load_state_dict(a.state_dict())
        <All keys matched successfully>
        >>> bool((a.weight == b.weight).all())
        True
        """
        if not isinstance(state_dict, dict):
            raise TypeError(
                f"Expected state_dict to be dict-like, got {type(state_dict)}."
            )
        missing_keys: list[str] = []
        unexpected_keys: list[str] = []
        error_msgs: list[str] = []
        state_dict = OrderedDict(state_dict)

        def load(module, prefix=""):
            if assign:
                module._assign_from_state_dict(state_dict, prefix, error_msgs)
            module._load_from_state_dict(state_dict, prefix, {}, True, missing_keys,
                                         unexpected_keys, error_msgs)
            for name, child in module._modules.items():
                if child is not None:
                    load(child, prefix + name + ".")

        load(self)
        if strict:
            if unexpected_keys:
                error_msgs.insert(0, "Unexpected key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in unexpected_keys)))
            if missing_keys:
                error_msgs.insert(0, "Missing key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in missing_keys)))
        if error_msgs:
            raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(
                type(self).__name__, "\n\t".join(error_msgs)))
        return _IncompatibleKeys(missing_keys, unexpected_keys)

    def _assign_from_state_dict(self, state_dict, prefix, error_msgs):
        for name, param in list(self._parameters.items()):
            value = state_dict.get(prefix + name)
            if param is None or not isinstance(value, Tensor) or value.shape != param.shape:
                continue
            self._parameters[name] = Parameter(value, requires_grad=param.requires_grad)
        for name, buf in list(self._buffers.items()):
            value = state_dict.get(prefix + name)
            if buf is None or not isinstance(value, Tensor) or value.shape != buf.shape:
                continue
            if name not in self._non_persistent_buffers_set:
                self._buffers[name] = value

    # ----- printing -----------------------------------------------------------------
    def _get_name(self) -> str:
        return type(self).__name__

    def extra_repr(self) -> str:
        """The text inside this module's parentheses in its printed tree (override it)."""
        return ""

    def __repr__(self):
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({name}): " + _addindent(repr(module), 2)
                       for name, module in self._modules.items()]
        lines = extra_lines + child_lines
        text = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                text += extra_lines[0]
            else:
                text += "\n  " + "\n  ".join(lines) + "\n"
        return text + ")"

    def share_memory(self) -> Module:
        """Move the parameters, their gradients and the buffers into shared memory, so
        that processes of :mod:`torcia.multiprocessing` given the module train the same
        weights (Hogwild); returns ``self``.

        Examples
        --------
        >>> import torcia
        >>> layer = torcia.nn.Linear(2, 1).share_memory()
        >>> layer.weight.is_shared()
        True
        """
        tensors = [t for t in (*self.parameters(), *self.buffers()) if t is not None]
        tensors += [p.grad for p in self.parameters() if p.grad is not None]
        share_memory(tensors)
        return self


# How __setattr__ treats each kind of registered attribute: (store, the class whose
# instances register into it, its name in errors, what may replace a registered entry and
# that type's name, how to register a new one). Checked in this order, as PyTorch does.
_STORES = (
    ("_parameters", Parameter, "parameter", Parameter, "torcia.nn.Parameter",
     Module.register_parameter),
    ("_modules", Module, "child module", Module, "torcia.nn.Module",
     lambda self, name, value: self._modules.__setitem__(name, value)),
    ("_buffers", Buffer, "buffer", Tensor, "torcia.Tensor",
     lambda self, name, value: self.register_buffer(name, value, value.persistent)),
)
_STORE_NAMES = tuple(entry[0] for entry in _STORES)


_EXTRA_STATE = "_extra_state"
#: PyTorch's name of the state-dict key suffix for ``get_extra_state``'s value
_EXTRA_STATE_KEY_SUFFIX = _EXTRA_STATE


def _insert(hooks: OrderedDict, key, hook, prepend: bool) -> None:
    hooks[key] = hook
    if prepend:
        hooks.move_to_end(key, last=False)


def _discard(d: dict, name: str, *stores: str) -> None:
    for store in stores:
        table = d.get(store)
        if table is not None and name in table:
            del table[name]
    nonpersistent = d.get("_non_persistent_buffers_set")
    if nonpersistent is not None:
        nonpersistent.discard(name)


def _check_name(name, what: str) -> None:
    if not isinstance(name, str):
        raise TypeError(f"{what} name should be a string. Got {_type_name(name)}")
    if name == "":
        raise KeyError(f'{what} name can\'t be empty string ""')
    if "." in name:
        raise KeyError(f'{what} name can\'t contain ".", got: {name}')


def _type_name(obj) -> str:
    if type(obj) is Tensor:
        return "torcia.Tensor"
    t = type(obj)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


# Hooks registered for every module (register_module_forward_hook and friends);
# _GLOBAL_HOOKS is non-empty exactly when some exist, the one test on the call path.
_GLOBAL_HOOKS: dict = {}
_GLOBAL_TABLES = {"forward_pre": OrderedDict(), "forward": OrderedDict()}


def register_module_forward_pre_hook(hook) -> RemovableHandle:
    """Call ``hook(module, args)`` before every module's ``forward``.

    Examples
    --------
    >>> import torcia
    >>> seen = []
    >>> hook = lambda module, args: seen.append(args[0].shape)
    >>> handle = torcia.nn.register_module_forward_pre_hook(hook)
    >>> _ = torcia.nn.ReLU()(torcia.zeros(3))
    >>> handle.remove()
    >>> seen
    [torcia.Size([3])]
    """
    return _register_global("forward_pre", hook)


def register_module_forward_hook(hook) -> RemovableHandle:
    """Call ``hook(module, args, output)`` after every module's ``forward``.

    Examples
    --------
    >>> import torcia
    >>> seen = []
    >>> hook = lambda module, args, output: seen.append(type(module).__name__)
    >>> handle = torcia.nn.register_module_forward_hook(hook)
    >>> _ = torcia.nn.Linear(2, 2)(torcia.zeros(1, 2))
    >>> handle.remove()
    >>> seen
    ['Linear']
    """
    return _register_global("forward", hook)


def _register_global(kind, hook):
    table = _GLOBAL_TABLES[kind]
    handle = _GlobalHandle(table)
    table[handle.id] = hook
    _GLOBAL_HOOKS.update(_GLOBAL_TABLES)
    return handle


class _GlobalHandle(RemovableHandle):
    def remove(self):
        super().remove()
        if not any(_GLOBAL_TABLES.values()):
            _GLOBAL_HOOKS.clear()
