"""DeviceMesh: processes arranged in an n-dimensional grid, with one process group per
line of the grid along each dimension, as ``torch.distributed.device_mesh``."""

from __future__ import annotations

import numpy as np

from torcia.distributed.collectives import (
    GroupMember,
    get_rank,
    get_world_size,
    init_process_group,
    is_initialized,
    new_group,
)
from torcia.distributed.options import Backend

__all__ = ["DeviceMesh", "init_device_mesh"]


class DeviceMesh:
    """An n-dimensional grid of global ranks with a process group along each dimension.

    For every dimension, the ranks that differ only in that coordinate form a group:
    :meth:`get_group` is the one holding this process. Every process of the job builds the
    same mesh (group creation is collective). Indexing by dimension names gives a mesh of
    those dimensions through this process (``mesh["dp"]``).

    Parameters
    ----------
    device_type : str
        "cpu" or "cuda", the device type of the tensors the groups move.
    mesh : array-like of int
        The global ranks, shaped as the grid.
    mesh_dim_names : tuple of str, optional

    Examples
    --------
    Under ``torcia-run --nproc-per-node 4``::

        mesh = DeviceMesh("cpu", [[0, 1], [2, 3]], mesh_dim_names=("dp", "tp"))
        dist.all_reduce(t, group=mesh.get_group("tp"))   # over {0, 1} or {2, 3}
        mesh["dp"].mesh                                  # tensor([0, 2]) on ranks 0, 2

    Run in one process:

    >>> import torcia
    >>> import torcia.distributed as dist
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> mesh = dist.DeviceMesh("cpu", [0])
    >>> mesh.size(), mesh.get_rank()
    (1, 0)
    >>> dist.destroy_process_group()
    """

    def __init__(self, device_type: str, mesh, *, mesh_dim_names=None, _init_backend=True,
                 _groups=None):
        import torcia

        arr = np.asarray(mesh.tolist() if isinstance(mesh, torcia.Tensor) else mesh)
        if arr.dtype.kind not in "iu":
            raise ValueError(f"DeviceMesh: mesh must hold integer ranks, got {arr.dtype}")
        if mesh_dim_names is not None:
            mesh_dim_names = tuple(mesh_dim_names)
            if len(mesh_dim_names) != arr.ndim:
                raise ValueError(f"mesh_dim_names {mesh_dim_names} has {len(mesh_dim_names)} "
                                 f"names for a {arr.ndim}-D mesh")
            if len(set(mesh_dim_names)) != len(mesh_dim_names):
                raise RuntimeError(f"Each mesh_dim_name must be unique, got {mesh_dim_names}")
        self.device_type = device_type
        self._mesh = arr.astype(np.int64)
        self.mesh_dim_names = mesh_dim_names
        if _groups is not None:
            self._groups = _groups
            return
        flat = sorted(self._mesh.reshape(-1).tolist())
        if _init_backend and (flat[0] < 0 or flat[-1] >= get_world_size()):
            raise ValueError(f"DeviceMesh: ranks {flat} are out of range for world size "
                             f"{get_world_size()}")
        if len(set(flat)) != len(flat):
            raise RuntimeError(f"DeviceMesh cannot have duplicate values, got {flat}")
        self._groups = self._make_groups() if _init_backend else [None] * arr.ndim

    def _make_groups(self):
        me = get_rank()
        whole = self._mesh.size == get_world_size()
        groups = []
        for dim in range(self._mesh.ndim):
            lines = np.moveaxis(self._mesh, dim, -1).reshape(-1, self._mesh.shape[dim])
            mine = None
            for line in lines.tolist():
                if whole and len(line) == get_world_size() and sorted(line) == line:
                    group = GroupMember.WORLD
                else:
                    # every process takes part in creating every line's group
                    group = new_group(line)
                if me in line:
                    mine = group
            groups.append(mine)
        return groups

    # ----- the grid ---------------------------------------------------------------------
    @property
    def mesh(self):
        """The grid of global ranks, as an int64 tensor."""
        import torcia

        return torcia.tensor(self._mesh)

    @property
    def shape(self) -> tuple:
        return tuple(self._mesh.shape)

    @property
    def ndim(self) -> int:
        return self._mesh.ndim

    def size(self, mesh_dim=None) -> int:
        """The number of ranks (along ``mesh_dim``, when given)."""
        if mesh_dim is None:
            return int(self._mesh.size)
        return int(self._mesh.shape[self._dim(mesh_dim)])

    def _dim(self, mesh_dim) -> int:
        if mesh_dim is None:
            if self.ndim != 1:
                raise RuntimeError(f"Found the DeviceMesh have {self.ndim} dimensions; "
                                   "pass mesh_dim")
            return 0
        if isinstance(mesh_dim, str):
            if not self.mesh_dim_names or mesh_dim not in self.mesh_dim_names:
                raise KeyError(f"Mesh dimension '{mesh_dim}' does not exist. Available "
                               f"mesh dimensions are: mesh_dim_names={self.mesh_dim_names}")
            return self.mesh_dim_names.index(mesh_dim)
        if not -self.ndim <= mesh_dim < self.ndim:
            raise IndexError(f"mesh_dim {mesh_dim} is out of range for a {self.ndim}-D mesh")
        return mesh_dim % self.ndim

    def get_coordinate(self):
        """This process's coordinates in the grid (None if it is not in the mesh)."""
        where = np.argwhere(self._mesh == get_rank())
        return [int(c) for c in where[0]] if len(where) else None

    def get_rank(self) -> int:
        """This process's global rank."""
        return get_rank()

    def get_local_rank(self, mesh_dim=None) -> int:
        """This process's coordinate along ``mesh_dim`` (its rank in that dimension's
        group)."""
        coordinate = self.get_coordinate()
        if coordinate is None:
            raise RuntimeError(f"rank {get_rank()} is not part of the mesh {self._mesh}")
        return coordinate[self._dim(mesh_dim)]

    # ----- groups -----------------------------------------------------------------------
    def get_group(self, mesh_dim=None):
        """The process group along ``mesh_dim`` that holds this process."""
        return self._groups[self._dim(mesh_dim)]

    def get_all_groups(self) -> list:
        """This process's group along each dimension."""
        return list(self._groups)

    def __getitem__(self, mesh_dim_names):
        names = (mesh_dim_names,) if isinstance(mesh_dim_names, str) else tuple(mesh_dim_names)
        dims = [self._dim(n) for n in names]
        if len(set(dims)) != len(dims):
            raise KeyError(f"Invalid mesh_dim_names {names}: a dimension appears twice")
        if names == self.mesh_dim_names:
            return self
        coordinate = self.get_coordinate()
        if coordinate is None:
            raise RuntimeError(f"rank {get_rank()} is not part of the mesh")
        # fix the other coordinates at this process's, keep the named dims in order
        index = tuple(slice(None) if d in dims else coordinate[d] for d in range(self.ndim))
        kept = sorted(dims)
        sub = np.transpose(self._mesh[index], [kept.index(d) for d in dims])
        return DeviceMesh(self.device_type, sub, mesh_dim_names=names,
                          _groups=[self._groups[d] for d in dims])

    def __eq__(self, other):
        return (isinstance(other, DeviceMesh) and self.device_type == other.device_type
                and np.array_equal(self._mesh, other._mesh)
                and self.mesh_dim_names == other.mesh_dim_names)

    def __hash__(self):
        return hash((self.device_type, self._mesh.tobytes(), self.shape, self.mesh_dim_names))

    def __repr__(self):
        names = f", mesh_dim_names={self.mesh_dim_names}" if self.mesh_dim_names else ""
        return f"DeviceMesh('{self.device_type}', {self._mesh.tolist()}{names})"


def init_device_mesh(device_type: str, mesh_shape, *, mesh_dim_names=None, backend_override=None):
    """A :class:`DeviceMesh` of ``mesh_shape`` over ranks ``0 .. prod(mesh_shape) - 1`` in
    row-major order, starting the default process group first if needed (with the
    device type's default backend).

    Examples
    --------
    Under ``torcia-run --nproc-per-node 4``::

        mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))

    Run in one process:

    >>> import torcia
    >>> import torcia.distributed as dist
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> mesh = dist.init_device_mesh("cpu", (1,), mesh_dim_names=("dp",))
    >>> mesh.shape, mesh["dp"].size()
    ((1,), 1)
    >>> dist.destroy_process_group()
    """
    mesh_shape = tuple(int(s) for s in mesh_shape)
    if mesh_dim_names is not None and len(mesh_dim_names) != len(mesh_shape):
        raise RuntimeError("mesh_shape and mesh_dim_names should have same length! Found "
                           f"len(mesh_dim_names): {len(mesh_dim_names)} and len(mesh_shape):"
                           f"{len(mesh_shape)}.")
    if device_type.startswith("cuda:"):
        raise RuntimeError(f"Device type with index is not supported but got {device_type}. "
                           "If you maintained a 'torch.device' object, it's recommended to "
                           "pass in 'device.type'.")
    if not is_initialized():
        init_process_group(Backend.default_device_backend_map.get(device_type, "gloo"))
    size = int(np.prod(mesh_shape))
    if size != get_world_size():
        raise RuntimeError(f"init_device_mesh: a mesh of shape {mesh_shape} needs "
                           f"{size} processes, the world has {get_world_size()}")
    mesh = np.arange(size, dtype=np.int64).reshape(mesh_shape)
    return DeviceMesh(device_type, mesh, mesh_dim_names=mesh_dim_names)
