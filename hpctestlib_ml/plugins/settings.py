"""Settings: the test variables a user sets (``-S NAME=VALUE``), checked
against their declarations (:mod:`hpctestlib_ml.settings`) first thing
at setup, before a job is written.

The variables take text too (``variable(str, int, ...)``), so that ``-S
threads_per_rank=abc`` reaches this check and fails the case with one
line, instead of stopping ReFrame with a traceback where it converts the
value.
"""
from reframe.core.pipeline import RegressionTestPlugin

from hpctestlib_ml import inputs, settings
from hpctestlib_ml.errors import BadInputError, FilesystemError


class Settings(RegressionTestPlugin):
    '''Each declared variable of a check converted to its type and
    checked (a number's range, a choice, a workload's precisions on the
    partition's device); a value that cannot work fails the case as
    ``bad_input``, naming what is allowed and the ``-S`` to fix.'''

    #: The parameter that is a check's precision, where one is (GPT-2's
    #: ``train_precision``): ``-S precision=`` would not change it.
    precision_parameter = None

    def check_settings(self):
        '''Every declared variable of this check, converted and checked.'''
        param = self.precision_parameter
        if param and self.precision not in (None, getattr(self, param)):
            name = type(self).__name__
            raise BadInputError(
                f'precision is the parameter {param} of {name}: select it '
                f"with -n '^{name}%.*{param}={self.precision}', not -S "
                f'precision')
        for name in type(self).var_space:
            declared = self.declaration().variable(name)
            if declared is None:
                continue
            choices, label = None, None
            if name == 'precision':
                choices = self.precision_choices()
                label = (f'precision of {self.workload} on '
                         f'{self.device_kind()}s')
            try:
                value = settings.convert(declared, getattr(self, name),
                                         f'fix -S {name}', choices, label)
            except settings.SettingError as err:
                raise BadInputError(str(err)) from None
            setattr(self, name, value)

    def refuse_overwritten(self):
        '''A job-shape variable given with ``-S`` that the layout sets
        itself (ReFrame's ``num_gpus_per_node``, ``num_tasks``,
        ``num_tasks_per_node``, ``num_cpus_per_task``, the suite's
        ``gpus_per_node``) and that disagrees with it: a
        :class:`~hpctestlib_ml.errors.BadInputError` naming what sets it,
        rather than a value dropped without a word.'''
        layout = self.layout
        tasks_per_node = layout.tasks_per_node(self.launch_mode)
        given = {'num_gpus_per_node': (self.num_gpus_per_node, None),
                 'gpus_per_node': (self.gpus_per_node, 0),
                 'num_tasks': (self.num_tasks, 1),
                 'num_tasks_per_node': (self.num_tasks_per_node, None),
                 'num_cpus_per_task': (self.num_cpus_per_task, None)}
        laid = {'num_gpus_per_node': layout.gpus_per_node,
                'gpus_per_node': layout.gpus_per_node,
                'num_tasks': layout.num_nodes * tasks_per_node,
                'num_tasks_per_node': tasks_per_node}
        for name, (value, unset) in given.items():
            if value in (unset, laid.get(name)):
                continue
            gpus = ('the GPUs a node come from the partition\'s devices (the '
                    'site configuration); fewer ranks: -S procs_per_node'
                    if 'gpus' in name else
                    'the tasks come from the scale and launch mode: -S '
                    'num_nodes, -S procs_per_node or another launch_mode'
                    if 'tasks' in name else
                    'the CPUs a task come from the partition\'s '
                    'processor.num_cpus: -S threads_per_rank')
            raise BadInputError(
                f'-S {name}={value} is not read: the suite sets it '
                f'({laid.get(name, "from the partition")} here): {gpus}')

    def check_inputs(self):
        '''The case's input paths (:meth:`input_paths`), at setup, where
        ReFrame's machine sees them as the job will
        (:func:`hpctestlib_ml.inputs.visible_here`): a missing one fails
        the case as ``filesystem``, a value that is no path as
        ``bad_input``, naming the path and the fix.'''
        local = self.current_partition.scheduler.registered_name == 'local'
        for item in self.input_paths():
            found = inputs.problem(item, local)
            if found:
                category, why = found
                raise (FilesystemError if category == 'filesystem' else
                       BadInputError)(why)

    def input_paths(self):
        '''The :class:`~hpctestlib_ml.inputs.Input` paths the case's job
        reads (after ``finalize_settings``); a workload with inputs says
        them.'''
        return []

    def device_kind(self):
        '''``gpu`` on a partition with GPUs, else ``cpu``.'''
        gpus = [d for d in self.current_partition.devices
                if d.device_type == 'gpu' and d.num_devices]
        return 'gpu' if gpus else 'cpu'

    def precision_choices(self):
        '''The precisions ``-S precision=`` may name here: the workload's
        declaration's on the partition's kind of device
        (:meth:`hpctestlib_ml.registry.Workload.precisions_on`); None
        where any is taken.'''
        return self.declaration().precisions_on(self.device_kind())
