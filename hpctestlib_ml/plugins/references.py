"""References: the external references file of a case, what its history
says (the reference's source, the loss curve), and the failures they
give (the reading: :mod:`hpctestlib_ml.history_refs.lookup`)."""
import os

import reframe.utility.sanity as sn
from reframe.core.builtins import run_after, run_before, variable
from reframe.core.exceptions import PerformanceError
from reframe.core.pipeline import RegressionTestPlugin

from hpctestlib_ml import sessions
from hpctestlib_ml.errors import BadInputError
from hpctestlib_ml.history_refs import lookup


class References(RegressionTestPlugin):
    '''Per-system references from ``config/references/<workload>.yaml``
    (ReFrame 4.10 external references), keyed by :attr:`reference_case`;
    a figure that misses one fails naming where it came from, and a loss
    curve that leaves its history fails as a numerics regression.

    The test runs ReFrame's own check non-strict (``strict_check =
    False``, set by :class:`~hpctestlib_ml.base.MLTrainingTest`) so that
    this plugin's hook after the performance stage runs:
    :meth:`fail_on_references` raises the failures ReFrame's check found,
    with the reference's source, which ReFrame's message cannot carry.
    ``-S strict_check=true`` gives ReFrame's message alone.'''

    #: What this case is on its partition, for references from history
    #: (``$index: [$partition, reference_case]``): size, nodes x ranks per
    #: node, launch mode, ``case_settings`` (batch and precision), the
    #: test's own parameters and ``reference_case_options``; set at setup, logged with every
    #: result. E.g. ``tiny 1x1 per_task batch=4 fp32``.
    #:
    #: :type: :class:`str`
    #: :default: set at setup
    reference_case = variable(str, value='')

    #: The first logged training losses (fixed seeds), logged with every
    #: result: ``hpcml references`` makes a reference curve of them, and a
    #: run whose curve leaves it fails (a numerics regression).
    #:
    #: :type: :class:`str`
    #: :default: set after the run
    loss_curve = variable(str, value='')

    #: The references file of this test (``<workload>.yaml`` in the
    #: references directory, ``HPCML_REFERENCES_DIR`` or
    #: ``config/references``).
    #:
    #: :type: :class:`str`
    #: :default: set at init
    references_file = variable(str, value='')

    #: The noise floor the partition declares, in percent
    #: (``extras['reference_noise_pct']``: how far its figures move from
    #: night to night with nothing changed), logged with every result:
    #: ``hpcml references`` sets no threshold narrower. ``''``: none
    #: declared (the default floor, 3 %). A value that is not a
    #: percentage fails the case at setup.
    #:
    #: :type: :class:`str`
    #: :default: set at setup
    reference_noise_pct = variable(str, value='')

    #: The ReFrame session this result came from
    #: (:func:`hpctestlib_ml.sessions.session_id`), logged with every
    #: result: ``hpcml references`` counts the sessions its runs span.
    #:
    #: :type: :class:`str`
    #: :default: set at init
    session_id = variable(str, value='')

    @run_after('init')
    def use_reference_file(self):
        self.references_file = lookup.references_file(self.workload)
        problem = lookup.shape_problem(self.references_file,
                                       type(self).__name__)
        if problem:
            raise BadInputError(problem)
        if os.path.isfile(self.references_file):
            self.reference = {'$ref': self.references_file}
        self.session_id = sessions.session_id()

    @run_after('setup')
    def read_noise_floor(self):
        ''':attr:`reference_noise_pct` from the partition's extras; a
        value that is not a percentage fails the case here, before its
        job is queued.'''
        part = self.current_partition
        value = part.extras.get(lookup.NOISE_FLOOR_EXTRA)
        try:
            floor = lookup.noise_floor(value)
        except ValueError as err:
            raise BadInputError(
                f"extras['{lookup.NOISE_FLOOR_EXTRA}'] of {part.fullname}: "
                f'{err}: fix the partition\'s extras in the site config '
                f'(config/local.py and config/slurm.py take '
                f'HPCML_REFERENCE_NOISE_PCT)') from None
        self.reference_noise_pct = '' if floor is None else f'{100 * floor:g}'

    def reference_case_key(self):
        ''':attr:`reference_case` of this case (see there).'''
        layout = self.layout
        parts = [self.resolved_size,
                 f'{layout.num_nodes}x{layout.procs_per_node}',
                 self.launch_mode, *self.case_settings()]
        parts += [f'{name}={getattr(self, name)}'
                  for name in type(self).param_space.params
                  if name not in ('scale', 'launch_mode')
                  and not name.startswith('.')]    # ReFrame's (--repeat)
        parts += [f'{name}={value}' for name, value in
                  self.reference_case_options().items()]
        if self.runs_in_container:
            parts.append('container')
        return ' '.join(map(str, parts))

    @run_before('performance')
    def record_loss_curve(self):
        self.loss_curve = lookup.format_loss_curve(
            self.metrics().losses)

    def history(self):
        '''(source, loss curve) of this case's history reference in
        :attr:`references_file`; (None, None) where it has none.'''
        return lookup.history_entry(
            self.references_file, type(self).__name__,
            self.current_partition.fullname, self.reference_case)

    @run_after('performance')
    def fail_on_references(self):
        '''The loss curve against its reference, then the figures
        ReFrame's check found off their references, as ReFrame words them,
        with where a reference from history came from (its runs and file).
        A run whose numbers changed fails as a numerics regression whatever
        its speed, its missed figures after it: a changed computation is
        the finding, and its speed is the same run's.'''
        if self.is_dry_run():
            return
        source, curve = self.history()
        problems = []
        departure = lookup.loss_curve_departure(
            self.metrics().losses, curve)
        if departure:
            problems.append(numerics_message(
                departure, curve['runs'], self.references_file,
                self.reference_case))
        missed = [_missed(key, values) for key, values
                  in self.perfvalues.items() if values[-1] == 'fail']
        if missed:
            where = (f'; reference from {self.references_file} '
                     f'({self.reference_case!r}): {source}' if source else '')
            problems.append('failed to meet reference(s): ' +
                            ', '.join(missed) + where)
        if problems:
            raise PerformanceError('; '.join(problems))


def numerics_message(departure, runs, references_file, case):
    '''The failure of a run whose loss curve departs from its history's
    (*departure*,
    :func:`~hpctestlib_ml.history_refs.lookup.loss_curve_departure`): a
    numerics regression, its category first.'''
    return (f'numerics: {departure} (a numerics regression: reference curve '
            f'of {runs} runs in {references_file}, {case!r})')


def _missed(key, values):
    '''``tag=value unit, expected ref (l=..., u=...)``, as ReFrame's
    performance check words a figure off its reference.'''
    value, ref, lower, upper, unit, _ = values
    low, high = sn.reference_bounds(ref, lower, upper)
    return (f'{key.split(":")[-1]}={value} {unit}, expected {ref} '
            f'(l={low}, u={high})')
