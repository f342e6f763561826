"""The perflog's columns, declared once: the writer
(:mod:`hpctestlib_ml.siteconfig`'s perflog format) and every reader (the
report's history, its causes, the tests' perflog writer) take their names,
order and roles from here, so that a field added or renamed in one place
cannot leave a reader behind (commit 243606b fixed a header that had
drifted from its reader).

A perflog line is the columns of :data:`COLUMNS`, in this order, then five
columns per performance variable (``<name>_value``, ``_unit``, ``_ref``,
``_lower_thres``, ``_upper_thres``). Each column is a ReFrame log record
attribute (``%(check_<name>)s``, the test's attribute or ReFrame's own);
its role says who reads it:

``case``
    identifies a case beside its display name (the report's keys);
``provenance``
    what ran and with what: compared before and after a change, in
    ``Column.cause_rank`` order where two differ as cleanly
    (:mod:`hpctestlib_ml.report.causes`);
``result``
    of one run beside its figures (loss curve, slowest rank, noise floor,
    session);
``record``
    logged with every result for a reader of the file, read by no tool;
``reframe``
    ReFrame's own bookkeeping (time, version, names, system, result).
"""
import dataclasses

#: The roles of :attr:`Column.role`.
CASE, PROVENANCE, RESULT, RECORD, REFRAME = ('case', 'provenance', 'result',
                                              'record', 'reframe')


@dataclasses.dataclass(frozen=True)
class Column:
    '''One column of the perflog.'''

    #: Its name in the header.
    name: str
    #: Who reads it (the module docstring).
    role: str
    #: The log record attribute ReFrame fills it from.
    attribute: str = None
    #: A provenance field's place among the likely causes of a change
    #: (0 first); ties go to the lower.
    cause_rank: int = None
    #: Whether its value holds several ``name=value`` pairs, compared one
    #: name at a time.
    pairs: bool = False
    #: Whether the report's keys of a run (its case, its node) are made
    #: of it: the history store parses each distinct combination of these
    #: once (:mod:`hpctestlib_ml.report.perflog_columns`).
    report_key: bool = False
    #: Whether a result's last bits may change with it: a provenance field
    #: of the software stack whose known-good answer digest a run is held
    #: against (:mod:`hpctestlib_ml.answers`; NCCL, through which no
    #: result passes, and the image's digest, whose framework versions the
    #: job reports from inside, are not).
    stack: bool = False

    @property
    def format(self):
        '''Its part of ReFrame's perflog format.'''
        return f'%({self.attribute or "check_" + self.name})s'


#: Every column before the performance values, in the perflog's order.
COLUMNS = (
    Column('job_completion_time', REFRAME),
    Column('version', REFRAME, attribute='version'),
    Column('display_name', REFRAME),
    Column('system', REFRAME),
    Column('partition', REFRAME),
    Column('environ', REFRAME),
    # the case
    Column('workload', CASE, report_key=True),
    Column('resolved_size', CASE, report_key=True),
    Column('scale', CASE),
    Column('launch_mode', CASE),
    Column('num_nodes', CASE),
    Column('procs_per_node', CASE),
    Column('gpus_per_node', CASE),
    Column('batch_size', CASE),
    Column('precision', CASE),
    # provenance (hpctestlib_ml.provenance)
    Column('suite_version', PROVENANCE, cause_rank=8),
    Column('framework_versions', PROVENANCE, cause_rank=4, pairs=True,
           stack=True),
    Column('cuda_version', PROVENANCE, cause_rank=2, stack=True),
    Column('gpu_driver', PROVENANCE, cause_rank=1, stack=True),
    Column('nccl_version', PROVENANCE, cause_rank=3),
    Column('container_image', PROVENANCE, cause_rank=5),
    Column('env_switches', PROVENANCE, cause_rank=6, pairs=True,
           stack=True),
    Column('energy_counter', PROVENANCE, cause_rank=9),
    # what ran (the programs' [hpcml] device records), MFU's peak, where
    # the run departs from the upstream benchmark's configuration, the
    # reference program's precision, and the memory per device estimated
    # at setup
    Column('device_ran', PROVENANCE, cause_rank=0, stack=True),
    Column('mfu_peak', PROVENANCE, cause_rank=7),
    Column('departures', RECORD),
    Column('reference_precision', RECORD),
    Column('memory_estimated', RECORD),
    # the slowest rank and its node, where the ranks' own compute spreads
    # beyond the noise (the programs' [hpcml] rank_compute records)
    Column('slowest_rank', RESULT),
    # the ranks' answers compared (hpctestlib_ml.answers): the right one,
    # and the line naming each rank whose answer was wrong
    Column('answer_digest', RESULT),
    Column('wrong_answer', RESULT),
    # references from history (hpctestlib_ml.history_refs): the case, its
    # first losses, the partition's noise floor and the ReFrame session
    Column('reference_case', CASE, report_key=True),
    Column('loss_curve', RESULT),
    Column('reference_noise_pct', RESULT),
    Column('session_id', RESULT),
    # the job's nodes (ReFrame's job.nodelist)
    Column('job_nodelist', PROVENANCE, cause_rank=10, report_key=True),
    Column('result', REFRAME),
)

#: The parts of a performance variable's columns, ``<name>_<part>``.
METRIC_PARTS = ('value', 'unit', 'ref', 'lower_thres', 'upper_thres')


def names(*roles):
    '''The names of the columns of *roles* (all where none is given), in
    the perflog's order.'''
    return tuple(c.name for c in COLUMNS if not roles or c.role in roles)


def by_cause_rank():
    '''The provenance fields, most likely cause of a change first.'''
    return tuple(c.name for c in sorted(
        (c for c in COLUMNS if c.cause_rank is not None),
        key=lambda c: c.cause_rank))


def report_keys():
    '''The fields the report's keys of a run are made of.'''
    return tuple(c.name for c in COLUMNS if c.report_key)


def stack_fields():
    '''The fields a software stack is made of (:attr:`Column.stack`).'''
    return tuple(c.name for c in COLUMNS if c.stack)


def pair_fields():
    '''The fields whose values are ``name=value`` pairs.'''
    return tuple(c.name for c in COLUMNS if c.pairs)
