"""What the declarations of the workloads whose programs log MLPerf events
(``:::MLLOG``: BERT, CosmoFlow, DeepLabV3+, AlphaFold2) share: one parser
(:mod:`hpctestlib_ml.parsers.mllog`), samples/s as throughput and
headline, MLPerf's run time as a whole-run metric, the shared training
loop (``src/mlperf_train``, which times each rank's forward passes), the
suite's precisions and the MLPerf logging package."""
from hpctestlib_ml import precisions, settings
from hpctestlib_ml.parsers import mllog
from hpctestlib_ml.registry import Headline, Workload

#: The fields every MLPerf-style declaration shares (each may override).
SHARED = dict(
    parser=mllog, headline=Headline('samples_per_second'),
    throughput_metric='samples_per_second',
    whole_run_metrics=('run_time_secs',), prints_rank_compute=True,
    precisions=precisions.PROGRAM, packages=('mlperf-logging',))


def mllog_workload(**declared):
    '''The :class:`~hpctestlib_ml.registry.Workload` of an MLPerf-style
    program: :data:`SHARED` with *declared* over it.'''
    return Workload(**{**SHARED, **declared})


#: The ``data`` variable's text.
DATA_DOC = ("'synthetic' or the dataset's directory (absolute); default: "
            "the partition's extras, else synthetic")


def model_and_data(name, program, module, table):
    '''The ``model`` and ``data`` variables of the check of workload
    *name* (:class:`~hpctestlib_ml.workloads.mlperf.MLLogTraining`'s), its
    models the keys of its program's table *table* in
    ``src/<program>/<module>.py``.'''
    return settings.variables(name, [
        ('model', 'str', None, "the program's model size (--size); "
         "default: the size's",
         {'choices': settings.program_table(program, module, table)}),
        ('data', 'path', None, DATA_DOC,
         {'allowed': "'synthetic' or an absolute directory"}),
    ])

