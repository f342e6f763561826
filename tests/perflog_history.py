"""A generated results history: perflogs as the suite writes them
(hpctestlib_ml.siteconfig's format), for the report's tests and benchmark.

Two systems (``booster:gpu`` and ``newcluster:gpu``, the latter
``SPEEDUP`` x faster), three workloads at 1-8 nodes, one run per case per
day, noise of a few percent, about 5% failed runs, a header change half-way
(the older generation lacks the provenance fields and is moved to
``.log.h0``, as ReFrame does) and dry-run lines (values ``None``).
"""
import os
import random
import time

SPEEDUP = 1.2
SYSTEMS = {('booster', 'gpu'): 1.0, ('newcluster', 'gpu'): SPEEDUP}
WORKLOADS = {  # check name, workload, metric, unit, per-node rate
    'MMoCLIP': ('clip', 'throughput_avg', 'samples/s', 2400.0),
    'BERTLarge': ('bert', 'samples_per_second', 'samples/s', 900.0),
    'ResNet50TF': ('resnet50', 'images_per_second', 'images/s', 2000.0),
}
NODES = (1, 2, 4, 8)
OLD_FIELDS = ('workload', 'resolved_size', 'scale', 'launch_mode',
              'num_nodes', 'procs_per_node', 'gpus_per_node', 'batch_size',
              'precision')
NEW_FIELDS = OLD_FIELDS + ('suite_version', 'framework_versions',
                           'cuda_version', 'gpu_driver', 'nccl_version',
                           'container_image', 'env_switches',
                           'energy_counter')
METRIC_PARTS = ('value', 'unit', 'ref', 'lower_thres', 'upper_thres')


def header(fields, metrics):
    return '|'.join(
        ['job_completion_time', 'version', 'display_name', 'system',
         'partition', 'environ', *fields, 'job_nodelist', 'result'] +
        [f'{m}_{p}' for m in metrics for p in METRIC_PARTS])


#: MMoCLIP on one node has a reference: 2300 samples/s, -10%.
REFERENCE = ('MMoCLIP', 1, 2300.0, -0.1)


def line(when, check, system, partition, fields, params, metrics, result):
    values = []
    has_ref = (check, int(params.get('num_nodes') or 0)) == REFERENCE[:2]
    for name, (value, unit) in metrics.items():
        ref, low = (REFERENCE[2:] if has_ref and name == 'throughput_avg'
                    else (0, None))
        values += ['None' if value is None else f'{value:.4f}', unit,
                   str(ref), str(low), 'None']
    return '|'.join(
        [time.strftime('%Y-%m-%dT%H:%M:%S+0000', time.gmtime(when)),
         '4.10.4', f'{check} %scale={params["scale"]} %launch_mode=per_task',
         system, partition, 'python', *(params.get(f, '') for f in fields),
         'n001', result] + values)


def generate(directory, days=60, seed=1, dry_runs=5, slowdown=None,
             start=1.79e9):
    '''Write the history under *directory*/<system>/<partition>/; return
    the number of lines written (runs and dry-run lines). *slowdown*:
    (check, nodes, factor) applied to booster's last 10 days, when
    booster's GPU driver goes from 550.54 to 560.28 (every case gets the
    new driver; one case is slower with it).'''
    rng = random.Random(seed)
    lines = 0
    for (system, partition), speed in SYSTEMS.items():
        out = os.path.join(directory, system, partition)
        os.makedirs(out, exist_ok=True)
        for check, (workload, metric, unit, rate) in WORKLOADS.items():
            metrics = (metric, 'mfu')
            old, new = [], []
            for day in range(days):
                fields = OLD_FIELDS if day < days // 2 else NEW_FIELDS
                target = old if day < days // 2 else new
                for nodes in NODES:
                    params = {
                        'workload': workload, 'resolved_size': 'benchmark',
                        'scale': f'{nodes}_node' + ('s' if nodes > 1 else ''),
                        'launch_mode': 'per_task', 'num_nodes': str(nodes),
                        'procs_per_node': '4', 'gpus_per_node': '4',
                        'batch_size': '64', 'precision': 'bf16',
                        'suite_version': '0.1.0+gabc1234',
                        'framework_versions': 'torch=2.5.1',
                        'energy_counter': 'nvml(4 GPUs)',
                        'gpu_driver': ('560.28' if slowdown and
                                       system == 'booster' and
                                       day >= days - 10 else '550.54')}
                    value = rate * nodes * speed * (0.93 ** (nodes.bit_length() - 1))
                    value *= rng.gauss(1.0, 0.02)
                    if (slowdown and system == 'booster' and
                            check == slowdown[0] and nodes == slowdown[1]
                            and day >= days - 10):
                        value *= slowdown[2]
                    failed = rng.random() < 0.05
                    when = start + day * 86400 + nodes * 600
                    values = {metric: (None if failed else value, unit),
                              'mfu': (None if failed else 40.0, '%')}
                    target.append(line(when, check, system, partition,
                                       fields, params, values,
                                       'fail' if failed else 'pass'))
            for i in range(dry_runs):
                params = {'workload': workload, 'scale': '1_node'}
                new.append(line(start + days * 86400 + i, check, system,
                                partition, NEW_FIELDS, params,
                                {metric: (None, unit), 'mfu': (None, '%')},
                                'pass'))
            base = os.path.join(out, f'{check}.log')
            with open(base + '.h0', 'w') as fp:
                fp.write(header(OLD_FIELDS, metrics) + '\n' +
                         '\n'.join(old) + '\n')
            with open(base, 'w') as fp:
                fp.write(header(NEW_FIELDS, metrics) + '\n' +
                         '\n'.join(new) + '\n')
            lines += len(old) + len(new)
    return lines


#: Checks of a node sweep (``--distribute=all``): check, workload, metric,
#: unit, per-node figure. The first three are component benchmarks.
SWEPT = (
    ('Collectives', 'collectives', 'allreduce_busbw_GBps', 'GB/s', 40.0),
    ('MatmulRate', 'matmul_rate', 'fp32_tflops', 'TFLOP/s', 50.0),
    ('Storage', 'storage', 'checkpoint_write_GBps', 'GB/s', 5.0),
    ('CosmoFlow', 'cosmoflow', 'samples_per_second', 'samples/s', 100.0),
    ('DeepLabV3Plus', 'deeplabv3plus', 'samples_per_second', 'samples/s',
     20.0),
)


def generate_sweeps(directory, nodes, days, checks=3, seed=2,
                    start=1.79e9, slow_node=None, first_day=0):
    '''Node sweeps of a system ``big:gpu`` under *directory*: each night,
    each of the first *checks* of :data:`SWEPT` on each of *nodes* nodes
    (one line per node, as ``reframe --distribute=all`` writes them, the
    suite's perflog format), 2 % noise, 1 % failures; *slow_node*: (node
    index, factor) applied on the last night; *first_day* > 0 appends
    nights from that one on. Returns the lines written.'''
    from perflog import suite_header
    rng = random.Random(seed)
    out = os.path.join(directory, 'big', 'gpu')
    os.makedirs(out, exist_ok=True)
    names = [f'nid{i:06d}' for i in range(nodes)]
    lines = 0
    for check, workload, metric, unit, rate in SWEPT[:checks]:
        fields = {'workload': workload, 'resolved_size': 'tiny',
                  'scale': '1_node', 'launch_mode': 'per_task',
                  'num_nodes': '1', 'procs_per_node': '4',
                  'gpus_per_node': '4', 'batch_size': '8',
                  'precision': 'bf16', 'suite_version': '0.1.0+gabc1234',
                  'framework_versions': 'torch=2.5.1',
                  'gpu_driver': '550.54',
                  'reference_case': 'tiny 1x4 per_task bf16'}
        # The columns between ReFrame's six leading ones and the job's
        # nodes and result, which each line below writes itself.
        from hpctestlib_ml import perflog_fields
        columns = perflog_fields.names()
        assert columns[:6] == ('job_completion_time', 'version',
                               'display_name', 'system', 'partition',
                               'environ')
        assert columns[-2:] == ('job_nodelist', 'result')
        middle = '|'.join(fields.get(f, '') for f in columns[6:-2])
        with open(os.path.join(out, f'{check}.log'),
                  'a' if first_day else 'w') as fp:
            if not first_day:
                fp.write(suite_header([metric]) + '\n')
            for day in range(first_day, first_day + days):
                night = start + day * 86400
                chunk = []
                for i, node in enumerate(names):
                    when = time.strftime('%Y-%m-%dT%H:%M:%S+0000',
                                         time.gmtime(night + i % 3600))
                    value = rate * rng.gauss(1.0, 0.02)
                    if slow_node and i == slow_node[0] and day == first_day + days - 1:
                        value *= slow_node[1]
                    failed = rng.random() < 0.01
                    figure = 'None' if failed else f'{value:.4f}'
                    chunk.append(
                        f'{when}|4.10.4|{check} %scale=1_node '
                        f'%launch_mode=per_task %.part=gpu %.nid={node}|'
                        f'big|gpu|default|{middle}|{node}|'
                        f'{"fail" if failed else "pass"}|{figure}|{unit}|0|'
                        f'None|None\n')
                fp.write(''.join(chunk))
                lines += len(chunk)
    return lines
