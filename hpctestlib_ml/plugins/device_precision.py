"""DevicePrecision: the precision a case runs in on its partition's
devices, where the size's or the user's is one the device lacks in
hardware (:func:`hpctestlib_ml.peaks.has_bf16`)."""
from reframe.core.logging import getlogger
from reframe.core.pipeline import RegressionTestPlugin

from hpctestlib_ml import peaks


class DevicePrecision(RegressionTestPlugin):
    '''The precision the device has: a case's precision (Sizing's
    ``precision``, once its size is resolved) made one the partition's
    GPUs run in hardware, or the case skipped.'''

    def use_precision_the_device_has(self, sized_precision):
        '''bf16 on GPUs without bf16 hardware (V100) is emulated, many
        times slower (``torch.cuda.is_bf16_supported()`` still says yes):
        a size's bf16 default (*sized_precision*) becomes its fp16 one,
        with loss scaling in every program; a bf16 case asked for (``-S
        precision=``, a workload's parameter) is skipped with the
        reason.'''
        fp16 = peaks.fp16_for(self.precision)
        model = self.partition_gpu_model()
        if fp16 is None or peaks.has_bf16(model):
            return
        if self.precision == sized_precision:
            getlogger().info(f'{self.display_name}: {model} has no bf16: '
                             f'running {fp16} instead of {self.precision}')
            self.precision = fp16
        else:
            self.skip(f'{model} has no bf16 hardware: precision '
                      f'{self.precision} would run emulated; use '
                      f'-S precision={fp16}')
