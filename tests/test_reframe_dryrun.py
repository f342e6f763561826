"""The JUWELS Booster job scripts, generated for real by reframe --dry-run."""
import pathlib
import re

import pytest

from conftest import BIN, REPO

pytestmark = pytest.mark.integration

MMOCLIP_ARGS = ('--dataset-type synthetic --train-num-samples 3200000 '
                '--epochs 1 --batch-size=512 --model ViT-L-14 --local-loss '
                '--gather-with-grad --grad-checkpointing --log-every-n-steps 1')


def dry_run(var, cache_dir, pattern, **env):
    '''reframe --dry-run of the JUWELS Booster config for the checks
    matching *pattern*; ({(nodes, mode): job script}, stdout).'''
    import os
    import subprocess
    env = {**os.environ, 'HPCML_VAR_DIR': str(var),
           'HPCML_CACHE_DIR': str(cache_dir), 'HPCML_ACCOUNT': 'jscbenchmark',
           **env}
    proc = subprocess.run(
        [BIN / 'reframe', '-C', REPO / 'config/systems/juwels_booster.py',
         '-c', REPO / 'checks', '-n', pattern, '--dry-run'], env=env,
        capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    scripts = {}
    for path in (var / 'stage').rglob('rfm_job.sh'):
        text = path.read_text()
        nodes = int(re.search(r'--nnodes=(\d+)', text).group(1)) \
            if 'torch.distributed.run' in text else \
            int(re.search(r'#SBATCH --ntasks=(\d+)', text).group(1)) // 4
        mode = 'torchrun' if 'torch.distributed.run' in text else 'per_task'
        assert (nodes, mode) not in scripts
        scripts[nodes, mode] = text
    return scripts, proc.stdout


@pytest.fixture(scope='module')
def job_scripts(tmp_path_factory, cache_dir):
    return dry_run(tmp_path_factory.mktemp('juwels') / 'var', cache_dir,
                   '^MMoCLIP%')


def sbatch(text):
    return re.findall(r'^#SBATCH (.*)$', text, re.MULTILINE)


def test_all_scales_both_modes(job_scripts):
    scripts, _ = job_scripts
    assert set(scripts) == {(n, m) for n in (1, 2, 4, 8, 16)
                            for m in ('per_task', 'torchrun')}


@pytest.mark.parametrize('nodes', [1, 2, 4, 8])
def test_srun_one_task_per_gpu(job_scripts, nodes):
    text = job_scripts[0][nodes, 'per_task']
    lines = sbatch(text)
    assert f'--ntasks={4 * nodes}' in lines
    assert '--ntasks-per-node=4' in lines
    assert '--cpus-per-task=24' in lines
    assert '--gres=gpu:4' in lines
    assert '--partition=booster' in lines
    assert '--account=jscbenchmark' in lines
    assert any(line.startswith('--time=') for line in lines)
    run_line = text.strip().splitlines()[-1]
    # One failed rank ends the step instead of leaving the others in a
    # collective until PyTorch's 30-minute timeout.
    assert run_line.startswith('srun --cpus-per-task=24 --kill-on-bad-exit=1 ')
    assert 'src/task_env.sh per_task python3 -u -m clip_train ' + \
        MMOCLIP_ARGS in run_line
    assert '--device cuda --precision amp --dist-url env://' in run_line


#: What JSC's runs export on JUWELS Booster (jubench-megatron-lm
#: jobscript_175B.sbatch, CARAML llm_benchmark_nvidia_amd.yaml).
JUWELS_NETWORK_ENV = ['export NCCL_SOCKET_IFNAME=ib0',
                      'export GLOO_SOCKET_IFNAME=ib0',
                      'export NCCL_IB_TIMEOUT=50',
                      'export NCCL_IB_RETRY_CNT=10',
                      'export UCX_RC_TIMEOUT=4s']


def test_every_job_exports_the_infiniband_environment(job_scripts):
    scripts, _ = job_scripts
    for text in scripts.values():
        lines = text.splitlines()
        exported = [line for line in lines if line in JUWELS_NETWORK_ENV]
        assert exported == JUWELS_NETWORK_ENV
        # Before the launch, so that srun's tasks inherit them.
        assert lines.index(exported[-1]) < next(
            i for i, line in enumerate(lines) if line.startswith('srun '))


@pytest.mark.parametrize('nodes', [1, 2, 4, 8])
def test_srun_one_torchrun_per_node(job_scripts, nodes):
    text = job_scripts[0][nodes, 'torchrun']
    lines = sbatch(text)
    assert f'--ntasks={nodes}' in lines
    assert '--ntasks-per-node=1' in lines
    assert '--cpus-per-task=96' in lines
    assert '--gres=gpu:4' in lines
    run_line = text.strip().splitlines()[-1]
    assert run_line.startswith('srun --cpus-per-task=96 --kill-on-bad-exit=1 ')
    assert (f'src/task_env.sh torchrun python3 -u -m torch.distributed.run '
            f'--nnodes={nodes} '
            f'--nproc-per-node=4 --rdzv-backend=c10d '
            f'--rdzv-endpoint=$MASTER_ADDR:$MASTER_PORT '
            f'--rdzv-id=${{SLURM_JOB_ID}} --max-restarts=0 -m clip_train -- '
            + MMOCLIP_ARGS) in run_line


@pytest.mark.parametrize('mode', ['per_task', 'torchrun'])
def test_programs_learn_their_devices_from_the_job(job_scripts, mode):
    '''A GPU case's programs know it expects GPUs (and stop where torch
    sees none), the sampler counts the case's GPUs of each node, per_task
    ranks know how many share a node (torchrun says it itself), NCCL
    logs its version and transport unless the site set NCCL_DEBUG, and
    the hang watch and NCCL's flight recorder are on.'''
    text = job_scripts[0][2, mode]
    assert 'export HPCML_DEVICE_KIND=gpu' in text
    assert 'export HPCML_GPUS_PER_NODE=4' in text
    assert ('export LOCAL_WORLD_SIZE=4' in text) == (mode == 'per_task')
    assert 'export NCCL_DEBUG=${NCCL_DEBUG:-INFO}' in text
    assert 'export NCCL_DEBUG_SUBSYS=${NCCL_DEBUG_SUBSYS:-INIT,NET}' in text
    assert 'CUDA_VISIBLE_DEVICES' not in text
    # GPU memory has its own caching allocator: glibc is left as it is.
    assert 'MALLOC_' not in text
    # The hang watch, and PyTorch's flight recorder of the NCCL
    # collectives dumping beside the job's output at a watchdog timeout.
    stage = re.search(r'export HPCML_HANG_DIR=(\S+)/hpcml_hang\n', text)
    assert stage, text
    assert 'export HPCML_HANG_BOUND_S=120\n' in text
    assert ('export TORCH_NCCL_TRACE_BUFFER_SIZE='
            '${TORCH_NCCL_TRACE_BUFFER_SIZE:-2000}') in text
    assert 'export TORCH_NCCL_DUMP_ON_TIMEOUT=' in text
    assert (f'export TORCH_NCCL_DEBUG_INFO_TEMP_FILE={stage.group(1)}/'
            f'hpcml_nccl_trace_rank_\n') in text


@pytest.mark.parametrize('mode', ['per_task', 'torchrun'])
def test_rendezvous_from_the_job_not_hard_coded(job_scripts, mode):
    text = job_scripts[0][8, mode]
    assert ('hpcml_first_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST"'
            ' | head -n 1)') in text
    assert "export HPCML_RENDEZVOUS_ADDRESS='{hostname}i'" in text
    assert 'src/node_address.sh "$hpcml_first_node")' in text
    assert 'export MASTER_PORT=$(( 20000 + ${SLURM_JOB_ID} % 10000 ))' in text
    assert 'module load Stages/2025' in text
    assert 'export OMP_NUM_THREADS=24' in text


def test_reference_at_8_nodes(job_scripts):
    _, stdout = job_scripts
    assert 'total_time_secs: None s (r:1260, l:None, u:0.0)' in stdout


def test_local_modes_select_the_size(run_reframe):
    '''--mode smoke runs the tiny size; --mode benchmark is for GPU
    partitions: on the CPU partition its cases are skipped with the reason
    (the benchmark's job on a GPU partition:
    test_local_gpu_partition_runs_the_benchmark_size).'''
    proc, var = run_reframe(BIN / 'reframe', '-C', REPO / 'config/local.py',
                            '-c', REPO / 'checks', '-n', '^MMoCLIP%',
                            '--mode', 'benchmark', '--dry-run')
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert 'Ran 0/3 test case(s)' in proc.stdout and '3 skipped' in \
        proc.stdout
    assert 'it is meant for GPU partitions' in proc.stdout
    assert not list((var / 'stage').rglob('rfm_job.sh'))

    proc, var = run_reframe(BIN / 'reframe', '-C', REPO / 'config/local.py',
                            '-c', REPO / 'checks', '-n', '^MMoCLIP%',
                            '--mode', 'smoke', '--dry-run')
    assert proc.returncode == 0, proc.stdout[-2000:]
    expected = '--model CLIP-tiny'
    scripts = list((var / 'stage').rglob('rfm_job.sh'))
    assert len(scripts) == 3
    for script in scripts:
        assert expected in script.read_text()
        # CPU partitions keep freed memory (constants.CPU_ALLOCATOR_ENV),
        # unless the site sets its own values.
        assert 'export MALLOC_MMAP_MAX_=${MALLOC_MMAP_MAX_:-0}' in \
            script.read_text()
        assert ('export MALLOC_TRIM_THRESHOLD_='
                '${MALLOC_TRIM_THRESHOLD_:-2147483647}') in script.read_text()


def test_local_gpu_partition_runs_the_benchmark_size(run_reframe, tmp_path):
    '''With GPUs present (a stand-in nvidia-smi), config/local.py adds a gpu
    partition and the size resolves to the benchmark's on it.'''
    import os
    bin_dir = tmp_path / 'fakebin'
    bin_dir.mkdir()
    smi = bin_dir / 'nvidia-smi'
    smi.write_text('#!/bin/sh\necho "NVIDIA A100-SXM4-40GB"\n'
                   'echo "NVIDIA A100-SXM4-40GB"\n')
    smi.chmod(0o755)
    proc, var = run_reframe(
        BIN / 'reframe', '-C', REPO / 'config/local.py', '-c', REPO / 'checks',
        '-n', '^MMoCLIP%', '--system', 'local:gpu', '--dry-run',
        env={'PATH': f'{bin_dir}:{os.environ["PATH"]}'})
    assert proc.returncode == 0, proc.stdout[-2000:]
    scripts = {p.parent.name: p.read_text()
               for p in (var / 'stage').rglob('rfm_job.sh')}
    # 1 GPU (both launch modes) and 2 GPUs under torchrun; the whole node
    # is 2 GPUs again (1 x 2, as 2_procs): it does not run twice.
    assert len(scripts) == 3, list(scripts)
    for text in scripts.values():
        assert '--model ViT-L-14' in text
        assert '--device cuda --precision amp' in text
    assert 'mfu' in proc.stdout and 'hfu' in proc.stdout


def prepared_dir(root):
    '''A directory as `hpcml prepare gpt2_finetune` leaves it (only the
    files the check looks for: the dry-run reads nothing else).'''
    from hpctestlib_ml.registry.gpt2_finetune import prepare
    model_dir, data_dir = prepare.gpt2_paths(root)
    for path, name in ((model_dir, 'config.json'),
                       (data_dir, 'dataset_dict.json')):
        path.mkdir(parents=True)
        (path / name).write_text('{}')
    return root


def juwels_scripts(var, cache_dir, pattern, *options):
    '''reframe --dry-run on JUWELS Booster: {display name without
    spaces: job script}, of every case: cases the memory check would skip
    too (``-S memory_check=false``; the check: tests/test_memory_fit.py).'''
    import json
    import os
    import subprocess
    env = {**os.environ, 'HPCML_VAR_DIR': str(var),
           'HPCML_CACHE_DIR': str(cache_dir), 'HPCML_ACCOUNT': 'jscbenchmark',
           'HPCML_PREPARED_DIR': str(prepared_dir(var.parent / 'prepared'))}
    proc = subprocess.run(
        [BIN / 'reframe', '-C', REPO / 'config/systems/juwels_booster.py',
         '-c', REPO / 'checks', '-n', pattern, '-S', 'memory_check=false',
         *options, '--dry-run', '--report-file', var / 'report.json'],
        env=env,
        capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    report = json.loads((var / 'report.json').read_text())
    scripts = {}
    for run in report['runs']:
        for case in run['testcases']:
            name = case['display_name'].replace(' ', '')
            scripts[name] = (pathlib.Path(case['stagedir']) /
                             'rfm_job.sh').read_text()
    return scripts


@pytest.fixture(scope='module')
def workload_scripts(tmp_path_factory, cache_dir):
    '''Job scripts of the workloads other than CLIP on JUWELS Booster: by
    display name (without spaces, as -n matches).'''
    return juwels_scripts(
        tmp_path_factory.mktemp('juwels-workloads') / 'var', cache_dir,
        '^(MegatronGPT|GPT2FineTune|BERTLarge|CosmoFlow|DeepLabV3Plus|'
        'AlphaFold2|ResNet50TF)%')


@pytest.fixture(scope='module')
def short_scripts(tmp_path_factory, cache_dir):
    '''Every workload's job at one node with --mode short.'''
    from hpctestlib_ml import registry
    checks = '|'.join(declared.check for declared in
                      registry.registered().values() if declared.trains)
    return juwels_scripts(
        tmp_path_factory.mktemp('juwels-short') / 'var', cache_dir,
        f'^({checks})%scale=1_node%launch_mode=per_task', '--mode', 'short')


#: Per check, what its short job runs: the benchmark's model and options,
#: a few steps.
SHORT_ARGS = {
    # 100 steps of 512 per GPU on 4 GPUs, not MMoCLIP's 3.2M samples.
    'MMoCLIP': ('--train-num-samples 204800 --epochs 1 --batch-size=512 '
                '--model ViT-L-14 --local-loss --gather-with-grad '
                '--grad-checkpointing', '--precision amp'),
    'MegatronGPT%model_size=800M': ('--num-layers 16 --hidden-size 2048',
                                    '--train-samples 640'),
    'GPT2FineTune%train_precision=bf16': (
        'gpt2_finetune/models/gpt2 --dataset-dir', 'wikitext-2-raw-v1',
        '--max-steps 100'),
    'BERTLarge': ('--model bert-large --seq-length 512 --max-predictions 76 '
                  '--batch-size 24 --steps 100', '--precision fp16'),
    'CosmoFlow': ('--size reference --batch-size 4 --steps 100',
                  '--precision fp16'),
    'DeepLabV3Plus': ('--size reference --batch-size 2 --steps 100',
                      '--precision fp16'),
    'AlphaFold2': ('--size reference --batch-size 1 --steps 100',
                   '--precision bf16'),
    'ResNet50TF': ('--image-size 224 --batch-size 64 --steps 100',
                   '--precision fp16'),
}


@pytest.mark.parametrize('check', sorted(SHORT_ARGS))
def test_short_mode_writes_the_benchmark_models_short_job(short_scripts,
                                                          check):
    name, _, param = check.partition('%')
    matches = [text for n, text in short_scripts.items()
               if n.startswith(name + '%') and param in n]
    assert len(matches) == 1, sorted(short_scripts)
    line = run_line(matches[0])
    for expected in SHORT_ARGS[check]:
        assert expected in line, line
    assert '3200000' not in line and '--num-train-epochs' not in line


def run_line(text):
    return text.strip().splitlines()[-1]


def test_megatron_caraml_sizes_on_juwels(workload_scripts):
    # Every CARAML size without a Megatron-LM checkout (the Megatron-Core
    # fallback runs TP x PP x DP): 800M (TP1/PP1) and 13B (TP2/PP2) from 1
    # node, 175B (TP8/PP8, 64 GPUs) at 16 nodes, as CARAML runs it.
    names = [n for n in workload_scripts if n.startswith('MegatronGPT')]
    assert {n.split('model_size=')[1] for n in names} == {
        '800M', '13B', '175B', 'llama3-8B', 'llama3-70B', 'gptj-6B'}
    # Llama 3 70B (TP 4 x PP 8 = 32 GPUs) from 8 nodes.
    assert {n.split('%')[1] for n in names if n.endswith('llama3-70B')} == {
        'scale=8_nodes', 'scale=16_nodes'}
    line = run_line(workload_scripts[
        'MegatronGPT%scale=16_nodes%launch_mode=per_task%model_size=175B'])
    assert '--num-layers 96 --hidden-size 12288' in line
    assert ('--tensor-model-parallel-size 8 --pipeline-model-parallel-size 8'
            in line)
    assert '--megatron-lm' not in line
    line = run_line(workload_scripts[
        'MegatronGPT%scale=2_nodes%launch_mode=per_task%model_size=13B'])
    # CARAML's arguments (tests/test_caraml_args.py holds them against
    # CARAML's YAML): the model's, RoPE included, and its training ones;
    # 13B's global batch is data parallel 2 x micro batch 2 x 64.
    assert ('--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 '
            '--num-layers 40 --hidden-size 5120 '
            '--num-attention-heads 32 --seq-length 2048 '
            '--max-position-embeddings 2048 --position-embedding-type rope '
            '--ffn-hidden-size 20480 --micro-batch-size 2 --global-batch-size 256 '
            '--train-samples 5120') in line
    assert '--untie-embeddings-and-output-weights' not in line
    assert ('--mock-data --tokenizer-type NullTokenizer --vocab-size 50257 '
            '--init-method-std 0.0048 --seed 42 --sequence-parallel '
            '--recompute-activations --recompute-granularity selective '
            '--fp16 --optimizer adam') in line
    assert '--use-distributed-optimizer' in line
    assert '--use-flash-attn' in line
    line = run_line(workload_scripts[
        'MegatronGPT%scale=8_nodes%launch_mode=torchrun%model_size=800M'])
    assert '--nnodes=8 --nproc-per-node=4' in line
    assert '--num-layers 16 --hidden-size 2048 --num-attention-heads 8' in line
    # CARAML's 32 is less than one micro batch on each of 32 GPUs.
    assert '--micro-batch-size 4 --global-batch-size 128' in line


def test_megatron_job_sets_carmls_environment(workload_scripts):
    '''CUDA_DEVICE_MAX_CONNECTIONS=1, as CARAML exports it: Megatron-LM
    asserts on tensor parallelism without it.'''
    script = workload_scripts[
        'MegatronGPT%scale=2_nodes%launch_mode=per_task%model_size=13B']
    assert 'export CUDA_DEVICE_MAX_CONNECTIONS=1' in script


@pytest.mark.parametrize('name, gpus', [
    ('MegatronGPT%scale=2_nodes%launch_mode=per_task%model_size=13B', 8),
    ('MegatronGPT%scale=16_nodes%launch_mode=per_task%model_size=175B', 64),
])
def test_megatron_core_accepts_the_large_jobs_arguments(workload_scripts,
                                                        name, gpus):
    '''13B and 175B cannot train on this machine: their generated
    arguments go through the fallback's own parser and layout checks
    (their models are built on the meta device by model-info).'''
    import shlex
    import sys
    sys.path.insert(0, str(REPO / 'src'))
    from gpt_pretrain import mcore_train
    argv = shlex.split(run_line(workload_scripts[name]).split(
        '-m gpt_pretrain ', 1)[1])
    args = mcore_train.parse_args(argv)
    dp, micro = mcore_train.layout(args, gpus)
    assert dp * args.tensor_model_parallel_size * \
        args.pipeline_model_parallel_size == gpus
    assert micro * args.micro_batch_size * dp == args.global_batch_size
    assert args.position_embedding_type == 'rope'


def test_gptj_on_juwels(workload_scripts):
    '''GPT-J 6B at 4 nodes (16 GPUs, TP 1): its arguments reach the
    fallback (partial, interleaved RoPE; untied output; its vocabulary on
    mock data), GPT-J's global batch of 512 in 32 micro-batches, and the
    departures from GPT-J are the case's to log.'''
    import shlex
    import sys
    sys.path.insert(0, str(REPO / 'src'))
    from gpt_pretrain import mcore_train
    line = run_line(workload_scripts[
        'MegatronGPT%scale=4_nodes%launch_mode=per_task%model_size=gptj-6B'])
    assert ('--tensor-model-parallel-size 1 --pipeline-model-parallel-size '
            '1 --num-layers 28 --hidden-size 4096 --num-attention-heads 16 '
            in line)
    assert ('--mock-data --tokenizer-type NullTokenizer --vocab-size 50400 '
            in line)
    args = mcore_train.parse_args(shlex.split(line.split(
        '-m gpt_pretrain ', 1)[1]))
    assert not [a for a in args.ignored if 'rotary' in a or 'rope' in a]
    assert (args.rotary_percent, args.rotary_interleaved,
            args.untie_embeddings_and_output_weights,
            args.ffn_hidden_size, args.bf16) == (0.25, True, True, 16384,
                                                 True)
    assert mcore_train.layout(args, 16) == (16, 32)
    assert args.global_batch_size == 512


def test_gpt2_precisions_and_offline_cache_on_juwels(workload_scripts):
    for precision in ('fp32', 'fp16', 'bf16'):
        text = workload_scripts[
            f'GPT2FineTune%scale=1_node%launch_mode=per_task%'
            f'train_precision={precision}']
        assert 'export HF_HUB_OFFLINE=1' in text
        assert 'export HF_DATASETS_OFFLINE=1' in text
        assert (f'--per-device-train-batch-size 8 --per-device-eval-batch-size'
                f' 8 --precision {precision}') in run_line(text)
        # What hpcml prepare fetched, read offline.
        assert re.search(r'--model \S+/prepared/gpt2_finetune/models/gpt2 '
                         r'--dataset-dir \S+/prepared/gpt2_finetune/datasets/'
                         r'wikitext-2-raw-v1 --num-train-epochs 3.0',
                         run_line(text))


def test_bert_large_on_juwels(workload_scripts):
    text = workload_scripts['BERTLarge%scale=4_nodes%launch_mode=per_task']
    assert '#SBATCH --ntasks=16' in text
    assert run_line(text).endswith(
        '-m bert_pretrain --model bert-large --seq-length 512 '
        '--max-predictions 76 --batch-size 24 --steps 100 --optimizer lamb '
        '--precision fp16 --data synthetic')


def test_cosmoflow_reference_size_on_juwels(workload_scripts):
    text = workload_scripts['CosmoFlow%scale=2_nodes%launch_mode=torchrun']
    assert '--nnodes=2 --nproc-per-node=4' in run_line(text)
    assert run_line(text).endswith(
        '-m cosmoflow -- --size reference --batch-size 4 --steps 100 '
        '--precision fp16 --data synthetic')


def test_deepcam_reference_size_on_juwels(workload_scripts):
    text = workload_scripts['DeepLabV3Plus%scale=1_node%launch_mode=per_task']
    assert '#SBATCH --ntasks=4' in text
    assert run_line(text).endswith(
        '-m deepcam --size reference --batch-size 2 --steps 50 '
        '--precision fp16 --data synthetic')


def test_alphafold2_reference_size_on_juwels(workload_scripts):
    text = workload_scripts['AlphaFold2%scale=8_nodes%launch_mode=per_task']
    assert '#SBATCH --ntasks=32' in text
    assert run_line(text).endswith(
        '-m alphafold2 --size reference --batch-size 1 --steps 50 '
        '--precision bf16 --data synthetic')


def test_resnet50_tensorflow_environment_on_juwels(workload_scripts):
    text = workload_scripts['ResNet50TF%scale=2_nodes%launch_mode=per_task']
    assert 'module load Stages/2025 GCC OpenMPI TensorFlow' in text
    assert 'PyTorch' not in text
    assert '#SBATCH --ntasks=8' in text
    assert run_line(text).endswith(
        '-m resnet50_tf --image-size 224 --batch-size 64 --steps 100 '
        '--precision fp16 --data synthetic')


def test_tf_cnn_benchmarks_needs_its_directory_in_the_site_config(
        tmp_path, cache_dir):
    import os
    import subprocess
    env = {**os.environ, 'HPCML_VAR_DIR': str(tmp_path / 'var'),
           'HPCML_CACHE_DIR': str(cache_dir), 'HPCML_ACCOUNT': 'x'}
    proc = subprocess.run(
        [BIN / 'reframe', '-C', REPO / 'config/systems/juwels_booster.py',
         '-c', REPO / 'checks/resnet50.py', '-n', '^ResNet50TF%',
         '-S', 'implementation=tf_cnn_benchmarks', '--dry-run'],
        env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert proc.returncode != 0
    # Horovod ranks are srun tasks: only per_task cases are generated.
    assert 'launch_mode=torchrun' not in proc.stdout
    assert "no extras['tf_cnn_benchmarks'] (the directory of " \
        "tf_cnn_benchmarks.py)" in proc.stdout


def test_amd_partition_refuses_the_repositorys_cuda_image(run_reframe):
    '''config/slurm.py on MI250 nodes with Apptainer: the container case
    would start NGC's CUDA image with --rocm and train on the CPU; it
    fails at setup naming the fix instead.'''
    proc, _ = run_reframe(
        BIN / 'reframe', '-C', REPO / 'config/slurm.py', '-c',
        REPO / 'checks', '-n', '^CosmoFlowContainer%scale=1_node%'
        'launch_mode=per_task', '--dry-run',
        env={'HPCML_GPUS_PER_NODE': '8', 'HPCML_GPU_MODEL': 'MI250-GCD',
             'HPCML_CPUS_PER_NODE': '64', 'HPCML_APPTAINER_MODULES':
             'apptainer', 'HPCML_SCHEDULER': 'squeue'})
    assert proc.returncode == 1, proc.stdout[-3000:]
    reason = re.search(r'\* Reason: (.*)', proc.stdout).group(1)
    assert 'cannot use AMD GPUs' in reason and \
        "extras['container_images']" in reason, reason
