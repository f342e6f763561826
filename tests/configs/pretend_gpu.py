"""A configuration that says this machine has a GPU it does not have: a
``gpu`` partition of one GPU on the local scheduler, an H100 unless
``HPCML_PRETEND_GPU_MODEL`` names another model of the peak table (with
``HPCML_PRETEND_DEVICE_MEMORY_GIB`` as its ``extras['device_memory_gib']``,
where set). The tests run GPU
cases here to see what a GPU case does where torch finds no GPU (a CUDA
build on an older driver, a container started without ``--nv``): it
must fail, saying so, never train on the CPU and pass."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '..'))

from hpctestlib_ml.siteconfig import (local_general,  # noqa: E402
                                      make_site_configuration, system_dirs)

site_configuration = make_site_configuration(
    systems=[{
        'name': 'pretend',
        'descr': 'This machine, said to have a GPU',
        'hostnames': ['.*'],
        'modules_system': 'nomod',
        **system_dirs(),
        'partitions': [{
            'name': 'gpu',
            'scheduler': 'local',
            'launcher': 'local',
            'environs': ['python'],
            'max_jobs': 1,
            'processor': {'num_cpus': os.cpu_count()},
            'devices': [{'type': 'gpu', 'num_devices': 1,
                         'model': os.environ.get('HPCML_PRETEND_GPU_MODEL',
                                                 'H100-SXM')}],
            'features': ['gpu'],
            'extras': {'max_nodes': 1, 'rendezvous_address': '127.0.0.1',
                       'gpu_vendor': 'nvidia',
                       **({'device_memory_gib': float(
                           os.environ['HPCML_PRETEND_DEVICE_MEMORY_GIB'])}
                          if os.environ.get('HPCML_PRETEND_DEVICE_MEMORY_GIB')
                          else {})},
        }],
    }],
    environments=[{
        'name': 'python',
        'features': ['torch', 'tensorflow'],
        'env_vars': [['PATH', f'{os.path.dirname(sys.executable)}:$PATH']],
        'target_systems': ['pretend'],
    }],
    general=local_general(),
)
