"""The category and one-line reason of failed runs (hpctestlib_ml/triage/),
on public failure logs of the programs and systems under the suite
(tests/data/triage/public/, sources in tests/data/SOURCES.md, "Triage"),
on the faults captured on this machine and the project's Slurm cluster, and
on the GPU faults test_failures.py sets in srun's lines. Each expectation
was worked out by reading the log: the category its root cause falls in,
the words of the reason, and the rank and node where the log names them."""
import json

import pytest

from conftest import DATA, read_data, under_a_limit
from hpctestlib_ml import triage
from test_failures import (CUDA_OOM, ILLEGAL_ACCESS_ABORT, NCCL_PEER_LEFT,
                           NCCL_SYSTEM_ERROR, PICOTRON_WATCHDOG,
                           nccl_error_then_peer_left, per_task_run_then)


def public_log(name):
    return (DATA / 'triage' / 'public' / name).read_text(encoding='utf-8')


#: file, category, words the reason holds, rank, node.
PUBLIC = [
    # out_of_memory
    ('mle_cuda_oom_fragmentation.log', 'out_of_memory',
     'RuntimeError: CUDA out of memory. Tried to allocate 304.00 MiB', None,
     None),
    # A whole Megatron-LM run (GPT-2 774M, one V100) to its OOM and
    # torchrun's root cause block.
    ('megatron525_gpt2_774m_v100_cuda_oom_terminal.log', 'out_of_memory',
     'rank 0 on v016.ib.bridges2.psc.edu (exit code 1): torch.cuda.'
     'OutOfMemoryError: CUDA out of memory. Tried to allocate 786.00 MiB',
     '0', 'v016.ib.bridges2.psc.edu'),
    ('nccl1235_nccl_warn_cuda_oom_gpu3.log', 'out_of_memory',
     "NCCL on ng30903 (GPU 3): Cuda failure 'out of memory'", None,
     'ng30903'),
    ('therock1054_hip_oom.log', 'out_of_memory',
     'HIP out of memory. Tried to allocate 16.00 GiB', None, None),
    ('strix_halo3_hip_oom.log', 'out_of_memory',
     'HIP out of memory. Tried to allocate 3.31 GiB', None, None),
    ('hafs101_srun_oom_kill_task4.log', 'out_of_memory',
     'out of memory (Slurm oom-kill): rank 4 on Orion-01-01', '4',
     'Orion-01-01'),
    ('tusas149_srun_oom_kill_tasks1-3.log', 'out_of_memory',
     'ranks 1-3 on nid001277', '1-3', 'nid001277'),
    # The workflow manager's errors after it are its consequences.
    ('snakemake371_oom_kill_workflow_error.log', 'out_of_memory',
     'rank 0 on NODE', '0', 'NODE'),
    ('robomamba10_torchrun_exitcode_minus9.log', 'out_of_memory',
     'local rank 5 was killed by signal 9 (SIGKILL); SIGKILL and no other '
     'cause', '5', None),
    # communication
    # stas00/ml-engineering's examples: a node whose network broke (the
    # peers' NCCL error, then NCCL's WARN naming the node that refused),
    # and PyTorch's desync report naming the rank the others waited for.
    ('mle_slurm_broken_network_nccl_system_error.log', 'communication',
     'ncclSystemError: System call (socket, malloc, munmap, etc) failed.',
     None, None),
    ('mle_slurm_broken_network_nccl_warn_connect_refused.log',
     'communication', 'NCCL on r11i6n2 (GPU 1): Connect to '
     '10.148.3.247<56821> failed : Connection refused', None, 'r11i6n2'),
    ('mle_nccl_desync_watchdog_rank0.log', 'communication',
     "rank 1 finished collective #2, but didn't join collective #3 (count "
     "from 1) (PyTorch's desync report); [Rank 0] Watchdog caught", '1',
     None),
    ('pytorch108732_gloo_connection_refused.log', 'communication',
     'connect [172.31.71.170]:13195: Connection refused', None, None),
    ('dmlcloud47_gloo_connectfullmesh_timeout.log', 'communication',
     'Gloo connectFullMesh failed', None, None),
    ('llm_training7_nccl_watchdog_timeout_rank2.log', 'communication',
     'Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7487, '
     'OpType=ALLREDUCE', '2', None),
    ('pytorch40273_nccl_warn_topology_path.log', 'communication',
     'NCCL on XXX (GPU 0): Could not find real path of /sys/class/pci_bus',
     None, 'XXX'),
    ('ms_swift1233_nccl_unhandled_system_error.log', 'communication',
     'NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:'
     '1333, unhandled system error', None, None),
    # hardware
    ('gpud_dmesg_xid119_gsp_timeout.log', 'hardware',
     'NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, name=nvidia-smi, Timeout '
     'after 6s of waiting for RPC response from GPU4 GSP!', None, None),
    ('jade194_cuda_uncorrectable_ecc.log', 'hardware',
     'RuntimeError: CUDA error: uncorrectable ECC error encountered', None,
     None),
    # The ECC error, not the NCCL watchdog it ended (rank 1's).
    ('kohya1434_ecc_then_nccl_watchdog_rank1.log', 'hardware',
     'CUDA error: uncorrectable ECC error encountered', '1', None),
    ('semseg33_cuda_runtime_error_39_ecc.log', 'hardware',
     'cuda runtime error (39) : uncorrectable ECC error', None, None),
    ('ogkm1150_xid45_after_xid149_xid145.log', 'hardware',
     'Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001 '
     'caused by previous Xid 149', None, None),
    # IDEFICS-80B's training: its cluster's alerts of Xid 63 and 64 (ECC
    # row remapping, then its failure), before the loss diverged.
    ('m4_idefics80b_xid63_row_remapping.log', 'hardware',
     'NVRM: Xid (PCI:0000:10:1c): 63, pid=1850, Row Remapper', None,
     'ip-26-0-146-100'),
    ('m4_idefics80b_xid64_row_remapper_failure.log', 'hardware',
     'NVRM: Xid (PCI:0000:90:1c): 64', None, 'ip-26-0-147-135'),
    ('returnn1486_nvidia_smi_gpu_lost.log', 'hardware',
     'Unable to determine the device handle for GPU0000:03:00.0: Unknown '
     'Error', None, None),
    # filesystem
    ('mle_xid63_row_remapper.log', 'hardware',
     'NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper', None, None),
    ('mle_tmp_enospc.log', 'filesystem',
     'OSError: [Errno 28] No space left on device', None, None),
    ('dolly139_enospc_torch_save.log', 'filesystem',
     'OSError: [Errno 28] No space left on device', None, None),
    ('taiyaki66_stale_file_handle.log', 'filesystem',
     'OSError: [Errno 116] Stale file handle', None, None),
    # The read that failed, not the C++ abort that followed.
    ('pytorch45826_stale_file_handle_then_abort.log', 'filesystem',
     'RuntimeError: read(): fd 33 failed with Stale file handle', None,
     None),
    ('hostg7_disk_quota_exceeded.log', 'filesystem',
     "Disk quota exceeded: 'validation/cherry_0_196.fasta'", None, None),
    ('eagle121_triton_cache_disk_quota.log', 'filesystem',
     'OSError: [Errno 122] Disk quota exceeded', None, None),
    ('ccd13_missing_dataset_torchrun.log', 'filesystem',
     "local rank 0 (exit code 1): FileNotFoundError: [Errno 2] No such file "
     "or directory: '/data/gx/OCR-CC/", '0', None),
    ('layumi214_missing_data_dir.log', 'filesystem',
     "No such file or directory: 'your_data_path/train_all'", None, None),
    # scheduler
    ('zetta671_slurm_time_limit.log', 'scheduler',
     'Slurm ended the job at its time limit (slurmstepd on ... at '
     '2024-04-20T09:09:37)', None, '...'),
    ('lightning20542_step_time_limit_sigterm.log', 'scheduler',
     'Slurm ended the job at its time limit (slurmstepd on maestro-3017',
     None, 'maestro-3017'),
    ('gemmaker242_slurm_preemption_doc.log', 'scheduler',
     'the job was preempted by Slurm (slurmstepd on cn119', None, 'cn119'),
    # The requeue, not the tasks' exit after it.
    ('submitit1708_slurm_job_requeue.log', 'scheduler',
     'Slurm requeued the job', None, 'SERVER_NAME'),
    ('myria3d123_step_cancelled_task0_terminated.log', 'scheduler',
     'the job was cancelled', None, 'DEL2212S020'),
    # A Jean Zay node lost under IDEFICS' training (huggingface/m4-logs):
    # srun names the node, slurmstepd on another cancels the step; and the
    # CUDA errors of the ranks on the lost node before srun's line.
    ('m4_idefics_jean_zay_node_failure_step_cancelled.log', 'scheduler',
     'a node of the job failed (Slurm: NODE_FAIL): jean-zay-iam37 '
     '(slurmstepd on jean-zay-iam17', None, 'jean-zay-iam37'),
    ('m4_idefics_jean_zay_cuda_unknown_error_node_failure.log', 'scheduler',
     'a node of the job failed (Slurm: NODE_FAIL): jean-zay-iam49 (srun)',
     None, 'jean-zay-iam49'),
    # numerics
    ('pai_megatron60_nan_grad_norm_rank3.log', 'numerics',
     'Rank 3: found NaN in local grad norm in backwards pass', '3',
     'set-zw04-kubernetes-pc133.mt'),
    ('firefly68_loss_scale_at_minimum.log', 'numerics',
     'Current loss scale already at minimum', None, None),
    ('megds203_inf_activations_grad_norm_nan.log', 'numerics',
     'grad norm: nan', None, None),
    ('tinyllama153_hf_trainer_eval_loss_nan.log', 'numerics',
     'eval_loss = nan', None, None),
    ('aicloud_apex_amp_loss_scale_below_one.log', 'numerics',
     'the loss scaler reached its floor: Gradient overflow. Skipping step, '
     'loss scaler 0 reducing loss scale to 1.0', None, None),
    # software
    ('datacomp79_no_module_named_training.log', 'software',
     "ModuleNotFoundError: No module named 'training'", None, None),
    ('fastfcn37_nvidia_driver_too_old.log', 'software',
     'AssertionError: The NVIDIA driver on your system is too old (found '
     'version 9000).', None, None),
    ('seqnet36_nvidia_driver_too_old.log', 'software',
     'The NVIDIA driver on your system is too old (found version 11040)',
     None, None),
    # OpenCLIP's training on a newer webdataset (a version that does not
    # fit): an exception no table knows is software.
    ('openclip935_webdataset_keyerror_fname.log', 'software',
     "KeyError: 'fname'", None, None),
    ('unsloth4_torchrun_root_cause_exit1_no_traceback.log', 'software',
     'rank 0 on 192-222-55-138 exited with code 1', '0', '192-222-55-138'),
    # bad_input
    ('pai_megatron21_unrecognized_arguments_torchrun.log', 'bad_input',
     'finetune_huggingface_chatglm.py: error: unrecognized arguments: '
     '--DDP-impl local', '0', None),
    ('ms_swift6823_megatron_sft_unrecognized_arguments.log', 'bad_input',
     'sft.py: error: unrecognized arguments: --softmax-type learnable',
     None, None),
    ('stabletuner12_accelerate_invalid_choice.log', 'bad_input',
     "argument --mixed_precision: invalid choice: 'fp32'", None, None),
    ('open_genie2_lightning_cli_invalid_choice.log', 'bad_input',
     "error: argument subcommand: invalid choice: 'train'", None, None),
    # Issue 31, item 6: logs from elsewhere that were classed wrong, or
    # whose reason lost what the reader acts on.
    # A task killed at Slurm's memory limit, then the job or step
    # cancelled: the memory, with the limit, not the cancel.
    ('stt2238_slurm_job_exceeded_memory_limit_cancelled.log',
     'out_of_memory', 'Slurm ended the run at its memory limit: Job 7518 '
     'exceeded memory limit (626359956 > 512000000), being killed '
     '(slurmstepd on xantipa', None, 'xantipa'),
    ('openbabel2658_slurm_step_exceeded_memory_limit.log', 'out_of_memory',
     'Step 1141810.0 exceeded memory limit (52917772 > 20971520)', None,
     'falkor7'),
    # The watchdog's collective and sequence number, not the C++ line
    # that names only the exception's type.
    ('megatron935_watchdog_reduce_scatter_in_what.log', 'communication',
     '[Rank 5] Watchdog caught collective operation timeout: WorkNCCL('
     'SeqNum=199, OpType=_REDUCE_SCATTER_BASE', '5', None),
    ('open_r1_620_watchdog_broadcast_wrapped.log', 'communication',
     'WorkNCCL(SeqNum=4, OpType=BROADCAST, NumelIn=112', '3', None),
    # A loss gone NaN with no exception: numerics, at its step.
    ('hashtag6_tf_global_step_loss_nan.log', 'numerics',
     'non-finite at step 2458: INFO:tensorflow:global step 2458: loss = nan',
     None, None),
    ('bloodcells15_step_loss_nan.log', 'numerics',
     'non-finite at step 1655: step 1655 - loss nan', None, None),
    ('pni7_lightning_progress_bar_loss_nan.log', 'numerics',
     'non-finite at step 320: Epoch 0: 100%', None, None),
    # No kernels for the GPU's architecture: the architecture said.
    ('clrnet83_no_kernel_image_sm_86.log', 'software',
     'no kernel image is available for execution on the device (NVIDIA '
     'GeForce RTX 3090 is sm_86; this PyTorch build has kernels for sm_37 '
     'sm_50 sm_60 sm_70)', None, None),
    ('sdwebui_nix9_no_kernel_image_sm_120_journal.log', 'software',
     '(NVIDIA GeForce RTX 5090 is sm_120; this PyTorch build has kernels '
     'for sm_50', None, None),
    # A program refusing its own flag (absl, gflags).
    ('automl934_absl_unknown_flag.log', 'bad_input',
     "Unknown command line flag 'job_dir'. Did you mean: log_dir ?", None,
     None),
    ('bertqa5_absl_unknown_flag_systemexit.log', 'bad_input',
     "FATAL Flags parsing error: Unknown command line flag 'f'", None, None),
    ('hatn4_absl_unrecognized_flag_error.log', 'bad_input',
     "UnrecognizedFlagError: Unknown command line flag 'train'", None, None),
    ('paddlespeech376_gflags_unknown_flag.log', 'bad_input',
     "ERROR: unknown command line flag 'augment_conf_path'", None, None),
    # Slurm refusing the job, with the option to fix; the submitting
    # tool's traceback after it is its consequence.
    ('scicomp792_sbatch_invalid_partition.log', 'bad_input',
     'sbatch: error: invalid partition specified: gpu-v100-32GB (Slurm '
     'refused the job: fix --partition)', None, None),
    ('hicpro645_sbatch_invalid_time.log', 'bad_input',
     'Invalid --time specification (Slurm refused the job: fix --time)',
     None, None),
    ('nemo_rl3051_sbatch_time_limit_invalid.log', 'bad_input',
     'Requested time limit is invalid (missing or exceeds some limit) '
     '(Slurm refused the job: fix --time)', None, None),
    ('babs195_sbatch_memory_refused_then_traceback.log', 'bad_input',
     'sbatch: error: Memory specification can not be satisfied (Slurm '
     'refused the job: fix --mem)', None, None),
]


@pytest.mark.parametrize('name, category, words, rank, node', PUBLIC,
                         ids=[row[0] for row in PUBLIC])
def test_public_failure_logs(name, category, words, rank, node):
    found = triage.triage(public_log(name))
    assert found.category == category, found
    assert words in found.reason, found
    assert (found.rank, found.node) == (rank, node), found
    assert '\n' not in found.reason and len(found.reason) <= 303


def test_the_public_logs_cover_every_category_several_times():
    '''Every category but the suite's own (``hang``: its hang watch's
    line, checked on the hangs this suite captured, below).'''
    counts = {c: sum(row[1] == c for row in PUBLIC)
              for c in triage.CATEGORIES if c not in triage.OWN_CATEGORIES}
    assert min(counts.values()) >= 3, counts
    on_disk = sorted(p.name for p in (DATA / 'triage' / 'public').iterdir())
    assert on_disk == sorted(row[0] for row in PUBLIC)


# Faults this suite captured for real

@pytest.mark.parametrize('path, category, words, rank, node', [
    # Rank 1 raised; rank 0's Gloo "Connection closed by peer" after it.
    (('failures', 'torchrun_rank1_raises_cpu.err'), 'software',
     'RuntimeError: hpcml fault injection: rank 1 raised', '1', 'localhost'),
    # kill -9 of rank 1's process: what the OOM killer does.
    (('slurm', 'rank_killed_per_task.err'), 'out_of_memory',
     'rank 1 on n2 died: Killed (srun)', '1', 'n2'),
    (('slurm', 'rank_killed_torchrun.err'), 'out_of_memory',
     'rank 1 was killed by signal 9 (SIGKILL)', '1', 'n1'),
    (('slurm', 'time_limit_per_task.err'), 'scheduler',
     'Slurm ended the job at its time limit', None, 'n1'),
    (('slurm', 'scancel_torchrun.err'), 'scheduler',
     'the job was cancelled (scancel', None, 'n1'),
    (('open_clip', 'missing_pandas_torchrun.err'), 'software',
     "cannot import OpenCLIP (No module named 'pandas')", '0', 'localhost'),
    # Captured here for triage (tests/data/SOURCES.md, "Failures"): rank 1
    # asks for 1 TiB of host memory; rank 0 then fails in Gloo.
    (('failures', 'torchrun_rank1_host_oom_cpu.err'), 'out_of_memory',
     "DefaultCPUAllocator: can't allocate memory: you tried to allocate "
     '1099511627776 bytes. Error code 12 (Cannot allocate memory)', '1',
     'localhost'),
    # Rank 1 stalls in its third step; rank 0's collective times out.
    (('failures', 'torchrun_rank1_stalls_gloo_timeout_cpu.err'),
     'communication', 'Timed out waiting 30000ms for recv operation to '
     'complete', '0', 'localhost'),
    # A learning rate 1e12 times too large: NaN at the second step, the
    # program ends the run (MLPerf status aborted) and exits 1.
    (('failures', 'torchrun_lr_diverges_cpu.out'), 'numerics',
     '"loss": NaN', None, None),
    (('failures', 'torchrun_lr_diverges_cpu.err'), 'software',
     'rank 0 on localhost exited with code 1', '0', 'localhost'),
    # Rank 1 stalls getting its sixth batch; the hang watch ends the job
    # (torchrun's SignalException, SIGTERM: its consequences).
    (('failures', 'torchrun_rank1_hangs_cpu.err'), 'hang',
     'rank 1 on vm stopped at step 5 in sitecustomize.py:14 stalled_next; '
     'rank 0 on vm waits in backward; no rank advanced for ', '1', 'vm'),
    # The same on the Slurm cluster: each node's watch said it; srun's
    # "Terminated" of the tasks it ended are the consequences.
    (('slurm', 'hang_rank1_stopped_per_task.err'), 'hang',
     'rank 1 on n2 stopped at step 92: its process is stopped (state T: '
     'SIGSTOP or a debugger), in backward; rank 0 on n1 waits in backward',
     '1', 'n2'),
    (('slurm', 'hang_rank1_asleep_in_all_reduce_per_task.err'), 'hang',
     'rank 1 on n2 stopped at step 2 in all_reduce (sitecustomize.py:15 '
     'all_reduce); rank 0 on n1 waits in all_reduce', '1', 'n2'),
])
def test_captured_faults(path, category, words, rank, node):
    found = triage.triage(read_data(*path), exitcode=1)
    assert (found.category, found.rank, found.node) == (category, rank,
                                                        node), found
    assert words in found.reason


@pytest.mark.parametrize('name, category, reason', [
    # A memory cgroup of 200 MiB on n2: the OOM killer, srun's "Killed".
    ('memory_limit_per_task', 'out_of_memory',
     'rank 1 on n2 died: Killed (srun); SIGKILL and no other cause in the '
     'log: most often the out-of-memory killer'),
    # Rank 1 stopped; rank 0's all-reduce times out (20 s), not rank 1's
    # "Terminated" after it.
    ('rank1_stalled_per_task', 'communication',
     'rank 0 on n1 (exit code 1): RuntimeError: [/__w/pytorch/pytorch/'
     'third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out '
     'waiting 20000ms for recv operation to complete'),
    # NaN loss; rank 1 ends first. Its exit is said with the NaN, not with
    # srun's "task 0: Terminated" for rank 0 after it.
    ('lr_diverges_per_task', 'numerics',
     'rank 1 on n2 exited with code 1 after the loss or the gradients went '
     'non-finite at step 2: '),
    ('tmpfs_full_storage_per_task', 'filesystem',
     'rank 0 on n1 (exit code 1): OSError: [Errno 28] No space left on '
     'device'),
])
def test_faults_provoked_on_the_slurm_cluster(name, category, reason):
    # stdout then stderr, as the suite reads a job's output.
    text = ''.join(read_data('slurm', f'{name}.{ext}')
                   for ext in ('out', 'err')
                   if (DATA / 'slurm' / f'{name}.{ext}').exists())
    found = triage.triage(text, exitcode=1)
    assert found.category == category, found
    assert found.reason.startswith(reason), found.reason


def test_the_diverged_runs_job_output_is_numerics():
    # The job's stdout and stderr together, as the suite reads them: the
    # exit the stderr alone shows, and why, from the stdout.
    text = (read_data('failures', 'torchrun_lr_diverges_cpu.out') +
            read_data('failures', 'torchrun_lr_diverges_cpu.err'))
    found = triage.triage(text, exitcode=1)
    assert (found.category, found.rank) == ('numerics', '0')
    assert found.reason.startswith('rank 0 on localhost exited with code 1 '
                                   'after the loss or the gradients went '
                                   'non-finite at step 2: ...')
    assert found.reason.endswith('"loss": NaN...')


@pytest.mark.parametrize('name', [
    'cpu_1rank_torchrun.err', 'cpu_2ranks_torchrun.err',
    'slurm_2nodes_torchrun.err', 'slurm_2procs_srun.err',
])
def test_good_runs_have_no_category(name):
    found = triage.triage(read_data('open_clip', name), 'COMPLETED', 0)
    assert found == triage.Triage(None, 'no failure found in the log')


def test_a_good_megatron_run_whose_gradients_went_nan_is_numerics():
    # Megatron-DeepSpeed issue #396, kept for the parser tests.
    text = read_data('megatron', 'public',
                     'bigscience_megds396_bf16_grad_norm_nan.log')
    found = triage.triage(text, 'COMPLETED', 0)
    assert found.category == 'numerics'
    # Its "loss scale: 1.0" is the scale, not the scaler reducing it.
    assert found.reason.startswith('the loss or the gradients went '
                                   'non-finite at step 5426: iteration 5426/')
    assert 'grad norm: nan' in found.reason


# The root cause over its consequences, in srun's and torchrun's lines

def test_one_ranks_oom_not_its_peers_killed_by_srun():
    text = per_task_run_then(
        CUDA_OOM,
        'srun: error: n2: task 1: Exited with exit code 1',
        'srun: launch/slurm: _step_signal: Terminating StepId=8.0',
        'srun: error: n1: task 0: Killed')
    found = triage.triage(text, exitcode=1)
    assert (found.category, found.rank, found.node) == ('out_of_memory', '1',
                                                        'n2')
    assert found.reason.startswith('rank 1 on n2 (exit code 1): torch.cuda.'
                                   'OutOfMemoryError: CUDA out of memory.')


def test_one_ranks_oom_not_the_nccl_errors_of_its_peers():
    # Rank 3 ran out of memory; rank 0 reports in NCCL that its peer left.
    text = f'[rank3]: {CUDA_OOM}\n[rank0]: {NCCL_PEER_LEFT}\n'
    found = triage.triage(text, exitcode=1)
    assert (found.category, found.rank) == ('out_of_memory', '3')
    # Also where the peers' NCCL error is the last line a rank raised and
    # no launcher names the rank that failed first.
    text = f'[rank3]: {CUDA_OOM}\n[rank0]: {NCCL_SYSTEM_ERROR}\n'
    found = triage.triage(text, exitcode=1)
    assert (found.category, found.rank) == ('out_of_memory', '3')
    assert 'CUDA out of memory' in found.reason


def test_a_watchdog_abort_is_communication():
    text = '\n'.join(PICOTRON_WATCHDOG) + '\n'
    found = triage.triage(text, exitcode=1)
    assert (found.category, found.rank, found.node) == (
        'communication', '0', '472a4389fceb')
    assert 'Watchdog caught collective operation timeout' in found.reason


def test_nccl_error_where_it_happened_is_communication():
    found = triage.triage(nccl_error_then_peer_left(), exitcode=1)
    assert (found.category, found.rank, found.node) == ('communication', '1',
                                                        'n2')


def test_an_illegal_memory_access_abort_is_software():
    found = triage.triage(ILLEGAL_ACCESS_ABORT)
    assert (found.category, found.rank, found.node) == ('software', '3',
                                                        'gpu07')


def test_the_job_state_alone():
    assert triage.triage('', 'TIMEOUT').category == 'scheduler'
    assert triage.triage('', 'OUT_OF_MEMORY').category == 'out_of_memory'
    assert triage.triage('', 'NODE_FAIL').category == 'scheduler'


# The tables

@pytest.mark.parametrize('line, category', [
    # NCCL's words for an allocation that failed: memory, not the network.
    ("host:1:2 [0] enqueue.cc:1085 NCCL WARN Cuda failure 'out of memory'",
     'out_of_memory'),
    ('[E ProcessGroupNCCL.cpp:916] [Rank 1] NCCL watchdog thread terminated '
     'with exception: CUDA error: uncorrectable ECC error encountered',
     'hardware'),
    ('ImportError: libnccl.so.2: cannot open shared object file: No such file '
     'or directory', 'software'),
    ("FileNotFoundError: [Errno 2] No such file or directory: '/data/x'",
     'filesystem'),
    ('ValueError: something else', None),
    # The suite's programs' losses, non-finite: MLPerf's logger (json.dumps
    # writes NaN), OpenCLIP's step line, the torchvision program's.
    (':::MLLOG {"namespace": "", "time_ms": 1795394367309, "event_type": '
     '"POINT_IN_TIME", "key": "tracked_stats", "value": {"throughput": '
     '35.2, "step_time": 0.227, "loss": NaN}}', 'numerics'),
    ('Contrastive_loss: nan (nan) Loss: nan (nan)', 'numerics'),
    ('[hpcml] iteration 3 loss inf', 'numerics'),
    ('[hpcml] iteration 0 loss 2.270360', None),
    # The words of other programs and systems (each table's comments name
    # where they come from).
    ('RuntimeError: [enforce fail at inline_container.cc:664] . unexpected '
     'pos 2602795840 vs 2602795728', 'filesystem'),
    ('OSError: [Errno 108] Cannot send after transport endpoint shutdown',
     'filesystem'),
    ('=>> PBS: job killed: walltime 3660 exceeded limit 3600', 'scheduler'),
    ('KeyboardInterrupt', 'scheduler'),
    ('torch.distributed.elastic.multiprocessing.api.SignalException: '
     'Process 4242 got signal: 15', 'scheduler'),
    ('mpirun noticed that process rank 3 with PID 0 on node n3 exited on '
     'signal 9 (Killed).', 'out_of_memory'),
    ('Killed', 'out_of_memory'),
    ('AssertionError: num_layers (30) must be divisible by pipeline model '
     'parallel size (4)', 'bad_input'),
    ('RuntimeError: The detected CUDA version (12.1) mismatches the version '
     'that was used to compile PyTorch (11.8).', 'software'),
    ('Memory access fault by GPU node-2 (Agent handle: 0x55f0) on address '
     '0x7f00. Reason: Page not present or supervisor privilege.',
     'software'),
    ('RuntimeError: Timed out initializing process group in store based '
     'barrier on rank: 0', 'communication'),
    ('FloatingPointError: Minimum loss scale reached (0.0001). Your loss is '
     'probably exploding.', 'numerics'),
    ('RuntimeError: CUDA error: uncorrectable NVLink error detected during '
     'the execution', 'hardware'),
    # Slurm's and the programs' refusals beside the logs' (each table's
    # comments name where they come from).
    ('srun: error: Unable to allocate resources: Invalid partition name '
     'specified', 'bad_input'),
    ('sbatch: error: Batch job submission failed: Invalid account or '
     'account/partition combination specified', 'bad_input'),
    ('sbatch.bin: error: invalid partition specified: <partition>',
     'bad_input'),
    ('absl.flags._exceptions.IllegalFlagValueError: flag --batch_size=abc: '
     "invalid literal for int() with base 10: 'abc'", 'bad_input'),
    # argparse's other refusals: an option's prefix that matches two, a
    # required choice, options that exclude each other.
    ('train.py: error: ambiguous option: --lr could match --lr-decay, '
     '--lr-warmup', 'bad_input'),
    ('train.py: error: one of the arguments --fp16 --bf16 is required',
     'bad_input'),
    ('train.py: error: argument --bf16: not allowed with argument --fp16',
     'bad_input'),
    # Slurm's memory enforcement, and its warning of a step that went on.
    ('slurmstepd: error: Exceeded step memory limit at some point.', None),
    ('slurmstepd: error: Exceeded job memory limit', 'out_of_memory'),
    # A loss NaN as a loop prints it; not a loss scale's value.
    ("{'loss': nan, 'reward': 5.7646, 'learning_rate': 5e-05}", 'numerics'),
    ('train_loss=nan, val_loss=inf', 'numerics'),
    ('loss_scale: inf', None),
])
def test_classify_orders_causes_before_consequences(line, category):
    assert triage.classify(line) == category


def test_problems_category():
    assert triage.problems_category(
        ['8 of 10 steps logged', 'training loss is not finite']) == 'numerics'
    assert triage.problems_category(['no training step logged']) == \
        'software'
    assert triage.problems_category([]) == 'software'


# Every failed case's message starts with its category

def sanity_message(text, state=None, exitcode=1, time_limit=60):
    '''The sanity plugin's failure message of a job that left *text*.'''
    from types import SimpleNamespace
    from hpctestlib_ml.plugins.sanity import Sanity
    case = SimpleNamespace(job=SimpleNamespace(state=state,
                                               exitcode=exitcode),
                           time_limit=time_limit)
    return Sanity.failure_message(case, text)


def test_the_sanity_failure_starts_with_its_category():
    text = per_task_run_then(
        CUDA_OOM,
        'srun: error: n2: task 1: Exited with exit code 1',
        'srun: launch/slurm: _step_signal: Terminating StepId=8.0',
        'srun: error: n1: task 0: Killed')
    assert sanity_message(text).startswith(
        'out_of_memory: job failed (exit code 1): rank 1 on n2 (exit code '
        '1): torch.cuda.OutOfMemoryError: CUDA out of memory.')
    assert sanity_message(read_data('slurm', 'time_limit_per_task.err'),
                          exitcode=None) == (
        'scheduler: job failed: Slurm ended the job at its time limit '
        '(slurmstepd on n1 at 2026-11-22T00:34:19): the time limit was 60 '
        's; raise it with -S time_limit= or run fewer -S steps=')
    # The hardware fault, not the rank's exit that followed it.
    message = sanity_message(
        public_log('kohya1434_ecc_then_nccl_watchdog_rank1.log'))
    assert message.startswith('hardware: job failed (exit code 1): '
                              'RuntimeError: CUDA error: uncorrectable ECC')


def test_log_problems_start_with_their_category():
    from hpctestlib_ml.plugins.sanity import problems_message
    assert problems_message(['training loss is not finite']) == \
        'numerics: training loss is not finite'
    assert problems_message(['8 of 10 steps logged']) == \
        'software: 8 of 10 steps logged'


def test_bad_input_reads_bad_input_once_and_first():
    from reframe.core.exceptions import what
    from hpctestlib_ml.errors import BadInputError, positive_int
    with pytest.raises(BadInputError) as caught:
        positive_int('batch_size', '0')
    assert what(caught.type, caught.value, None) == (
        "bad_input: batch_size must be an integer >= 1, got '0': fix -S "
        "batch_size")


def test_a_numerics_regression_starts_with_numerics():
    from hpctestlib_ml.plugins.references import numerics_message
    message = numerics_message(
        'loss curve departs from reference at logged step 1: 2.5 vs 2.3 '
        '+/- 0.01', 5, 'config/references/megatron.yaml', 'tiny 1x1')
    assert message.startswith('numerics: loss curve departs from reference '
                              'at logged step 1')
    assert triage.classify(message) == 'numerics'


def test_nul_bytes_with_no_newline_are_read_past_in_bounded_memory(
        tmp_path):
    '''``hpcml triage`` on 2 GB of NUL bytes with no newline (what a crash
    can leave) held it all, twice, and was still matching patterns five
    minutes later (the bad-input round, issue 39, row 59). Now a line
    over 64 KiB is read by its start, in memory that bounds: under 384 MiB
    more than the process starts with, a log of 256 MiB of NUL bytes is
    no training log in one line, and one with the same NUL bytes in the
    middle of its run is triaged as without them (about 6 s).'''
    nul = tmp_path / 'nul.log'
    with open(nul, 'wb') as fp:
        fp.truncate(256 << 20)
    log = per_task_run_then(CUDA_OOM,
                            'srun: error: n2: task 1: Exited with exit code 1')
    head, tail = log[:len(log) // 2], log[len(log) // 2:]
    crashed = tmp_path / 'crashed.log'
    with open(crashed, 'w') as fp:
        fp.write(head)
        fp.truncate(len(head.encode()) + (256 << 20))
    with open(crashed, 'a') as fp:
        fp.write('\n' + tail)
    status, out, err = under_a_limit(['triage', nul, crashed], 384)
    assert status == 1, err
    assert err.splitlines() == [
        f'hpcml triage: {nul}: no training log recognised: the file is '
        f'binary data, not text: give the job\'s output (its stdout and '
        f'stderr)',
        f'hpcml triage: {crashed}: 1 line(s) over 64 KiB long read by '
        f'their first 64 KiB']
    found = [json.loads(line) for line in out.splitlines()]
    expected = triage.triage(log)
    assert [f['file'] for f in found] == [str(nul), str(crashed)]
    assert (found[1]['category'], found[1]['reason']) == (
        expected.category, expected.reason) == ('out_of_memory',
                                                found[1]['reason'])


def test_the_hang_watch_s_line_and_what_wins_over_it():
    '''The watch's summary is the reason; where the job was killed before
    the watch had every rank's report, its notice; a GPU's own error is
    the cause of a hang, never its consequence.'''
    notice = ('hpcml hang watch: no rank on n1 advanced for 131 s (bound '
              '120 s): recording stacks in /stage/hpcml_hang\n'
              'srun: error: n1: task 0: Terminated\n')
    found = triage.triage(notice, exitcode=143)
    assert (found.category, found.rank, found.node) == ('hang', None, None)
    assert found.reason.startswith('no rank on n1 advanced for 131 s')
    summary = notice + ('hpcml hang: ranks 0-1 wait in all_reduce at step '
                        '9; no rank advanced for 131 s (bound 120 s); who '
                        'acts: the operators\n')
    found = triage.triage(summary, exitcode=143)
    assert (found.category, found.rank) == ('hang', None)
    assert found.reason.startswith('ranks 0-1 wait in all_reduce')
    xid = ('NVRM: Xid (PCI:0000:9b:00): 79, pid=1, GPU has fallen off the '
           'bus.\n') + summary
    assert triage.triage(xid, exitcode=143).category == 'hardware'
