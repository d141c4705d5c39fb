"""libcomm as a torch.distributed backend.

Importing this package registers the backend "libcomm" for CPU and CUDA tensors, so that

    dist.init_process_group("libcomm")                # or "cpu:libcomm,cuda:nccl"

runs torch.distributed's collectives on libcomm. Installed with pip, torch imports it by itself
(the "torch.backends" entry point; TORCH_DEVICE_BACKEND_AUTOLOAD=0 turns that off).
"""

import torch  # loads the torch libraries that the extension links against
import torch.distributed as _distributed

from torch_libcomm import _C

__all__ = ["register"]


def register() -> None:
    """Registers the backend "libcomm" with torch.distributed (once; again is a no-op)."""
    if not _distributed.is_available():
        return
    if not hasattr(_distributed.Backend, "LIBCOMM"):
        _distributed.Backend.register_backend(
            "libcomm", _C._create, extended_api=True, devices=["cpu", "cuda"]
        )


def _autoload() -> None:
    """torch's entry point ("torch.backends"): importing the package registers the backend."""


register()
