"""HangWatch: the job's ranks watched for a hang while the case runs
(the watch: ``src/hang_watch.py``, in each task's reaper; the ranks'
heartbeats: ``src/heartbeat.py``). This plugin sets the bound and where
the stacks go; a hang's line is read by :mod:`hpctestlib_ml.triage`
(category ``hang``)."""
import os

from reframe.core.builtins import variable
from reframe.core.pipeline import RegressionTestPlugin

from hpctestlib_ml import settings
from hpctestlib_ml.constants import HANG_DIR, NCCL_TRACE_PREFIX


class HangWatch(RegressionTestPlugin):
    '''A case whose ranks all stop advancing for longer than the bound is
    ended, its ranks' stacks kept in ``hpcml_hang/`` beside the job's
    output, and it fails with one line naming the rank that stopped
    where the others wait.'''

    #: Seconds with no rank advancing after which the case is ended as
    #: hung, or 10 of its steps where those are longer (the slowest
    #: rank's mean step, or its last where longer); armed at the first
    #: step (start-up, compilation and the first step set no pace). 0
    #: turns the watch off.
    #:
    #: :type: :class:`float` or :obj:`None`
    #: :default: :obj:`None` (``HPCML_HANG_BOUND_S``, else 120)
    hang_bound_s = variable(str, int, float, type(None), value=None)

    def set_hang_watch(self):
        '''The job's ``HPCML_HANG_BOUND_S`` and ``HPCML_HANG_DIR`` (the
        stage directory's :data:`~hpctestlib_ml.constants.HANG_DIR`),
        unless the bound is 0 (its value was checked with the other
        settings, :class:`~hpctestlib_ml.plugins.settings.Settings`); on
        GPUs PyTorch's flight recorder of the NCCL collectives, which
        dumps each rank's last collectives beside the job's output
        (:data:`~hpctestlib_ml.constants.NCCL_TRACE_PREFIX`) when NCCL's
        watchdog times a collective out.'''
        if self.hang_bound_s is None:
            self.hang_bound_s = settings.env('HPCML_HANG_BOUND_S')
        if not self.hang_bound_s:
            return
        self.env_vars['HPCML_HANG_BOUND_S'] = f'{self.hang_bound_s:g}'
        self.env_vars['HPCML_HANG_DIR'] = os.path.join(self.stagedir,
                                                       HANG_DIR)
        if self.uses_gpus:
            self.env_vars['TORCH_NCCL_TRACE_BUFFER_SIZE'] = \
                '${TORCH_NCCL_TRACE_BUFFER_SIZE:-2000}'
            self.env_vars['TORCH_NCCL_DUMP_ON_TIMEOUT'] = \
                '${TORCH_NCCL_DUMP_ON_TIMEOUT:-1}'
            self.env_vars['TORCH_NCCL_DEBUG_INFO_TEMP_FILE'] = \
                os.path.join(self.stagedir, NCCL_TRACE_PREFIX)
