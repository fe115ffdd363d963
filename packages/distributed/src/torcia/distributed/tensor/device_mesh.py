"""``torch.distributed.tensor.device_mesh``'s names: the mesh classes of
``torcia.distributed.device_mesh``."""

from torcia.distributed.device_mesh import DeviceMesh, init_device_mesh

__all__ = ["DeviceMesh", "init_device_mesh"]
