"""The ``probes`` phase of ``validate.sh``: what the machine is, as the
suite will see it, in ``OUT/probes/`` (``probes.json`` and the raw
outputs beside it), with a verdict per expectation.

Facts: torch's version, CUDA runtime, cuDNN and NCCL; the device's name,
capability and memory; bf16 in hardware and TF32 as torch sets it
(``src/device_choice.py`` decides both, as the programs do); the driver
and ``nvidia-smi -q``; ``python -m torch.utils.collect_env``; the
partitions ``config/local.py`` makes and the PyTorch cases it generates
at ``--mode short``; the perflog's provenance fields
(``src/provenance.py``, read as the checks read it); the energy sampler's
source over 3 s (``src/energy_sampler.py``); matrix product rates per
precision, beside the peaks that MFU divides by; the machine's and the
validation venv's packages.
"""
import json
import os
import pathlib
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / 'src'))

import device_choice                                   # noqa: E402
from phases import pytorch_checks                      # noqa: E402


def run(command, out=None, timeout=120, env=None):
    '''*command*'s stdout (also written to *out*), '' where it fails.'''
    try:
        proc = subprocess.run(command, capture_output=True, text=True,
                              timeout=timeout, cwd=REPO,
                              env={**os.environ, **(env or {})})
        text = proc.stdout + (f'\n[stderr]\n{proc.stderr}' if proc.returncode
                              else '')
    except (OSError, subprocess.SubprocessError) as err:
        text = f'[failed: {err}]'
    if out:
        out.write_text(text)
    return text


def torch_facts():
    '''What torch says about itself and device 0.'''
    import torch
    facts = {'torch': torch.__version__, 'cuda_runtime': torch.version.cuda,
             'hip_runtime': getattr(torch.version, 'hip', None),
             'cudnn': (torch.backends.cudnn.version()
                       if torch.backends.cudnn.is_available() else None),
             'cuda_available': torch.cuda.is_available(),
             'device_count': torch.cuda.device_count(),
             'matmul_allow_tf32': torch.backends.cuda.matmul.allow_tf32,
             'cudnn_allow_tf32': torch.backends.cudnn.allow_tf32,
             'float32_matmul_precision': torch.get_float32_matmul_precision(),
             'NVIDIA_TF32_OVERRIDE': os.environ.get('NVIDIA_TF32_OVERRIDE')}
    if not facts['cuda_available']:
        return facts
    backend = 'hip' if facts['hip_runtime'] else 'cuda'
    capability = torch.cuda.get_device_capability(0)
    props = torch.cuda.get_device_properties(0)
    facts.update({
        'backend': backend, 'name': torch.cuda.get_device_name(0),
        'capability': '.'.join(map(str, capability)),
        'memory_MiB': round(props.total_memory / 2**20),
        'multiprocessors': props.multi_processor_count,
        'bf16_supported_by_torch': torch.cuda.is_bf16_supported(),
        'bf16_native': device_choice.bf16_native(backend, capability),
        'tf32_active_by_default': device_choice.tf32_active(
            backend, capability, torch.backends.cuda.matmul.allow_tf32,
            os.environ),
    })
    try:
        facts['nccl'] = '.'.join(map(str, torch.cuda.nccl.version()))
    except (AttributeError, RuntimeError):
        facts['nccl'] = None
    return facts


def matmul_rates(gpu):
    '''FLOP/s of square matrix products per precision (bf16, fp16, TF32,
    IEEE fp32 on a GPU: n=8192, the mean of 10 after 3 warm-ups; fp32 at
    n=1024, 5 after 1, on a CPU), measured by ``src/matmul_rate`` as the
    ``MatmulRate`` check measures them.'''
    import torch

    import matmul_rate
    if not gpu:
        return matmul_rate.rates(torch.device('cpu'), ('fp32',), 1024,
                                 iterations=5, warmup=1)
    rates = matmul_rate.rates(torch.device('cuda'),
                              matmul_rate.GPU_PRECISIONS, 8192)
    torch.backends.cuda.matmul.allow_tf32 = False
    return rates


def local_partitions(out_dir, env):
    '''The partitions config/local.py makes here (ReFrame's view).'''
    text = run([os.path.join(os.path.dirname(sys.executable), 'reframe'),
                '-C', 'config/local.py', '--show-config=systems/0/partitions'],
               out_dir / 'local-partitions.txt', env=env)
    start = text.find('[')
    try:
        return json.JSONDecoder().raw_decode(text[start:])[0]
    except ValueError:
        return None


def sampler_label(out_dir):
    '''The energy sampler's first line after 3 s: its sources or why
    there are none.'''
    csv = out_dir / 'energy-sampler.csv'
    sampler = REPO / 'src' / 'energy_sampler.py'
    proc = subprocess.Popen([sys.executable, str(sampler), str(csv),
                             str(out_dir / 'energy-sampler-rss.txt')],
                            stderr=subprocess.DEVNULL)
    time.sleep(3)
    proc.terminate()
    proc.wait(timeout=10)
    try:
        return csv.read_text().splitlines()[0].lstrip('# ').strip()
    except (OSError, IndexError):
        return None


def checks(facts, gpu):
    '''[(ok, expectation, what was found)].'''
    from hpctestlib_ml.constants import DEVICE_PEAK_FLOPS
    torch = facts['torch_facts']
    parts = {p['name']: p for p in facts['local_partitions'] or []}
    found = []
    if not gpu:
        found.append((not torch['cuda_available'], 'torch sees no GPU here',
                      f'cuda available: {torch["cuda_available"]}'))
        found.append(('gpu' not in parts and 'cpu' in parts,
                      'config/local.py makes a cpu partition and no gpu one',
                      ', '.join(parts) or 'no partitions read'))
        found.append((facts['sampler'] is not None,
                      'the energy sampler starts and names its source or '
                      'why there is none', str(facts['sampler'])))
        return found
    found.append((torch['cuda_available'] and torch['device_count'] >= 1,
                  'torch sees a GPU',
                  f'{torch["device_count"]} x {torch.get("name")}, runtime '
                  f'{torch["cuda_runtime"] or torch["hip_runtime"]}'))
    gpu_part = parts.get('gpu')
    model = None
    if gpu_part:
        devices = gpu_part.get('devices') or [{}]
        model = devices[0].get('model')
    descr = gpu_part and gpu_part['descr']
    found.append((model in DEVICE_PEAK_FLOPS,
                  'config/local.py makes a gpu partition of a model in the '
                  'peak table', f'partition gpu: {descr}; model {model}'))
    name = torch.get('name') or ''
    nvl = 'NVL' in name and model and 'NVL' not in model
    found.append((not nvl, 'the peak table entry is this product\'s',
                  f'{name} -> {model}' + (' (an NVL card has lower clocks '
                                          'than SXM: review finding 10)'
                                          if nvl else '')))
    found.append((torch.get('bf16_native') is True,
                  'bf16 runs in hardware (Ampere or later)',
                  f'capability {torch.get("capability")}'))
    found.append((str(facts['sampler'] or '').startswith('nvml'),
                  'the energy sampler reads the GPU\'s NVML energy counter',
                  str(facts['sampler'])))
    peaks = DEVICE_PEAK_FLOPS.get(model, {})
    measured = facts['matmul_flops']
    over = [f'{k} {measured[k] / 1e12:.0f} > {peaks[k] / 1e12:.0f}'
            for k in measured if k in peaks and measured[k] > peaks[k]]
    found.append((peaks and not over,
                  'matrix products run below the peaks MFU divides by',
                  ', '.join(f'{k} {v / 1e12:.0f}' for k, v in measured.items())
                  + f' TFLOP/s measured; table {model}: '
                  + (', '.join(over) if over else
                     ', '.join(f'{k} {v / 1e12:.1f}' for k, v in
                               peaks.items()))))
    runtime = torch['cuda_runtime'] or torch['hip_runtime']
    logged = facts['provenance'].get('cuda_version')
    found.append((logged == runtime,
                  'the perflog\'s cuda_version is the CUDA runtime that '
                  'torch runs on', f'provenance cuda_version {logged}, '
                  f'torch.version.cuda {runtime} (review finding 15)'))
    return found


def main(out, base_python):
    out_dir = pathlib.Path(out) / 'probes'
    out_dir.mkdir(parents=True, exist_ok=True)
    env = {'HPCML_VAR_DIR': str(out_dir / 'var'),
           'HPCML_CACHE_DIR': str(pathlib.Path(out) / 'cache')}
    gpu = bool(run(['nvidia-smi', '-L']).strip().startswith('GPU'))
    run([base_python, '-m', 'pip', 'list'], out_dir / 'pip-list-machine.txt')
    run([sys.executable, '-m', 'pip', 'freeze'],
        out_dir / 'pip-freeze-venv.txt')
    run([sys.executable, '-m', 'pip', 'check'], out_dir / 'pip-check.txt')
    run(['nvidia-smi'], out_dir / 'nvidia-smi.txt')
    run(['nvidia-smi', '-q'], out_dir / 'nvidia-smi-q.txt')
    run([sys.executable, '-m', 'torch.utils.collect_env'],
        out_dir / 'collect_env.txt', timeout=180)
    facts = {'gpu': gpu, 'python': sys.version.split()[0],
             'venv': sys.prefix, 'torch_facts': torch_facts()}
    facts['matmul_flops'] = matmul_rates(
        gpu and facts['torch_facts']['cuda_available'])
    # What a job's first task writes, read as the checks read it.
    from hpctestlib_ml import provenance
    run([sys.executable, str(REPO / 'src' / 'provenance.py')],
        out_dir / provenance.PROVENANCE_FILE)
    facts['provenance'] = provenance.job_provenance(out_dir)
    facts['local_partitions'] = local_partitions(out_dir, env)
    pattern = '|'.join(pytorch_checks())
    run([os.path.join(os.path.dirname(sys.executable), 'reframe'),
         '-C', 'config/local.py', '-c', 'checks', '-l', '--mode', 'short',
         '--system', 'local:gpu' if gpu else 'local:cpu', '-n',
         f'^({pattern})%'], out_dir / 'cases-short.txt', env=env)
    facts['sampler'] = sampler_label(out_dir)
    facts['checks'] = [{'ok': bool(ok), 'expect': what, 'found': detail}
                       for ok, what, detail in checks(facts, gpu)]
    (out_dir / 'probes.json').write_text(json.dumps(facts, indent=1) + '\n')
    return facts


if __name__ == '__main__':
    facts = main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2
                 else sys.executable)
    for check in facts['checks']:
        print(f'probes: {"ok  " if check["ok"] else "FAIL"} '
              f'{check["expect"]}: {check["found"]}')
