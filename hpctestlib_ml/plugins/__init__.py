"""The parts of :class:`hpctestlib_ml.base.MLTrainingTest`: ReFrame
plugins (``RegressionTestPlugin``), each owning its variables and hooks,
each a thin adapter over a pure module that decides.

``workload`` and ``log`` are the bottom ones: the others call what they
declare and they import none of them. The setup steps the plugins provide
run in the order :meth:`hpctestlib_ml.base.MLTrainingTest.configure_job`
calls them.
"""
from hpctestlib_ml.plugins.answers import Answers
from hpctestlib_ml.plugins.containers import Containers
from hpctestlib_ml.plugins.device_precision import DevicePrecision
from hpctestlib_ml.plugins.hang_watch import HangWatch
from hpctestlib_ml.plugins.launching import Launching
from hpctestlib_ml.plugins.log import JobLog
from hpctestlib_ml.plugins.memory_fit import MemoryFit
from hpctestlib_ml.plugins.placement import Placement
from hpctestlib_ml.plugins.provenance import Energy, Provenance
from hpctestlib_ml.plugins.references import References
from hpctestlib_ml.plugins.sanity import Sanity
from hpctestlib_ml.plugins.settings import Settings
from hpctestlib_ml.plugins.sizing import Sizing
from hpctestlib_ml.plugins.utilisation import Utilisation
from hpctestlib_ml.plugins.workload import WorkloadInterface

__all__ = ['Answers', 'Containers', 'DevicePrecision', 'Energy', 'HangWatch',
           'JobLog', 'Launching', 'MemoryFit', 'Placement', 'Provenance',
           'References', 'Sanity', 'Settings', 'Sizing', 'Utilisation',
           'WorkloadInterface']
