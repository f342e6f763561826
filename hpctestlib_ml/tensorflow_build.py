"""Whether the installed TensorFlow can compute on a partition's GPUs,
decided when a config loads, without importing TensorFlow (seconds, and
GPU initialisation).

A TensorFlow wheel records how it was built in
``tensorflow/python/platform/build_info.py``, generated at build time
(``build_info = collections.OrderedDict([... ('is_cuda_build', True),
('is_rocm_build', False), ...])``; ``tf.sysconfig.get_build_info()``
returns it). ``tensorflow-cpu`` (the suite's default extra) says
``is_cuda_build`` False, so on a GPU partition ResNet50TF would train on
the CPU; the ``tensorflow`` wheel (``tensorflow[and-cuda]``) and NVIDIA's
builds say True, ``tensorflow-rocm`` says ``is_rocm_build``. The file is
read as text: what is installed decides, whatever the distribution's name.
"""
import ast
import importlib.machinery
import pathlib

#: The GPU vendor (``extras['gpu_vendor']``) -> the build its GPUs need.
BACKEND_OF_VENDOR = {'nvidia': 'cuda', 'amd': 'rocm'}


def gpu_backend(build_info_source):
    '''``cuda``, ``rocm`` or None (a CPU-only build, or text that is not a
    build_info module) from the source of TensorFlow's
    ``build_info.py``.'''
    try:
        tree = ast.parse(build_info_source or '')
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Assign) and any(
                getattr(t, 'id', None) == 'build_info' for t in node.targets)):
            continue
        value = node.value
        if isinstance(value, ast.Call) and value.args:  # OrderedDict([...])
            value = value.args[0]
        try:
            info = dict(ast.literal_eval(value))
        except (ValueError, TypeError, SyntaxError):
            return None
        if info.get('is_cuda_build') is True:
            return 'cuda'
        if info.get('is_rocm_build') is True:
            return 'rocm'
        return None
    return None


def installed_build_info(path=None):
    '''The text of the ``build_info.py`` of the TensorFlow that ``import
    tensorflow`` would load from *path* (default ``sys.path``), without
    importing it; None where TensorFlow is not installed.'''
    spec = importlib.machinery.PathFinder.find_spec('tensorflow', path)
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        file = pathlib.Path(location, 'python', 'platform', 'build_info.py')
        if file.is_file():
            return file.read_text()
    return None


def drives(gpu_vendor, path=None):
    '''Whether the installed TensorFlow (from *path*, default
    ``sys.path``) computes on *gpu_vendor*'s GPUs (``nvidia``, ``amd``).'''
    return (gpu_vendor in BACKEND_OF_VENDOR and
            gpu_backend(installed_build_info(path)) ==
            BACKEND_OF_VENDOR[gpu_vendor])
