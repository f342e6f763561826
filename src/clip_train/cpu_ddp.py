"""Let OpenCLIP wrap a CPU model in DistributedDataParallel.

Why: ``open_clip_train.main`` (3.3.0) always calls
``DistributedDataParallel(model, device_ids=[device])``. PyTorch rejects
``device_ids`` for CPU modules ("DistributedDataParallel device_ids and
output_device arguments only work with single-device/multiple-device GPU
modules or CPU modules, but got device_ids [device(type='cpu')]..."), so a
2-rank CPU run (gloo) fails before the first step. This drops ``device_ids``
when the model lives on the CPU and leaves every GPU run untouched.
"""
import functools

import torch


def allow_ddp_on_cpu():
    """Patch ``torch.nn.parallel.DistributedDataParallel`` in place (idempotent)."""
    ddp_class = torch.nn.parallel.DistributedDataParallel
    if getattr(ddp_class.__init__, '_hpcml_cpu_patch', False):
        return

    original_init = ddp_class.__init__

    @functools.wraps(original_init)
    def init(self, module, device_ids=None, *args, **kwargs):
        first_param = next(module.parameters(), None)
        if first_param is not None and first_param.device.type == 'cpu':
            device_ids = None
        original_init(self, module, device_ids, *args, **kwargs)

    init._hpcml_cpu_patch = True
    ddp_class.__init__ = init
