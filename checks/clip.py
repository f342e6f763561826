"""CLIP: OpenCLIP training, the MMoCLIP benchmark of the JUPITER Benchmark Suite.

On GPU partitions: ViT-L-14 on 3.2M synthetic pairs, the benchmark's rules
(metric ``total_time_secs``; baseline <= 1260 s on 8 JUWELS Booster nodes).
On CPU partitions: the same program and code path with the CLIP-tiny model.
"""
import reframe as rfm

from hpctestlib_ml.workloads.clip import MMoCLIPTraining


@rfm.simple_test
class MMoCLIP(MMoCLIPTraining):
    descr = 'OpenCLIP training (MMoCLIP benchmark rules at benchmark size)'
    maintainers = ['hpcml']
    tags = {'clip', 'mmoclip'}


@rfm.simple_test
class MMoCLIPContainer(MMoCLIP):
    descr = 'OpenCLIP training in the PyTorch Apptainer image'
    runs_in_container = True
