"""The parsers on public logs of the real world (tests/data/SOURCES.md): the
values each gives are the upstream definition's, worked out by hand from
the log (the comments say how)."""
import pytest

from conftest import read_data
from hpctestlib_ml import flops
from hpctestlib_ml.parsers import (hf_trainer, megatron, megatron_args, mllog,
                                   open_clip, tf_cnn_benchmarks)

approx = pytest.approx


def mlperf(name):
    return mllog.extract_metrics(read_data('mllog', 'mlperf', name))


# MLPerf results. samples/s: the in-run training throughput records, the
# first dropped; world size: number_of_ranks, else nodes x accelerators.
@pytest.mark.parametrize('name, expected', [
    # Top-level `throughput` events, one per epoch (17), no tracked_stats;
    # staging inside the run; eval_accuracy logged as -MAE.
    ('cosmoflow_nvidia_v1.0_dgxa100_n16.log', dict(
        run_time_secs=1456.298, samples_per_second=8590.669979,
        throughput_records=17, world_size=128, global_batch_size=128,
        eval_error=0.123414993, eval_accuracy=-0.123414993, epochs=17,
        steps=None, loss_last=None, status='success')),
    # tracked_stats per epoch (21); eval_error only; 128 nodes x 4.
    ('cosmoflow_helmholtzai_v2.0_horeka_n512.log', dict(
        run_time_secs=364.579, samples_per_second=33677.948,
        throughput_records=21, world_size=512, eval_error=0.123703666,
        eval_accuracy=None, status='success')),
    # tracked_stats per epoch; the loss as `train_loss` events; 58 steps
    # an epoch: epoch_stop's step_num 1392.
    ('deepcam_nvidia_v3.0_eos_n256.log', dict(
        run_time_secs=49.556, samples_per_second=62871.091,
        throughput_records=24, steps=1392, world_size=2048,
        global_batch_size=2048, eval_accuracy=0.8232905268669128,
        loss_first=0.40792280435562134, loss_last=0.0039299968630075455,
        losses_finite=True)),
    # No throughput logged at all: no figure rather than a made-up one.
    ('deepcam_anl_v1.0_thetagpu_n128_excerpt.log', dict(
        run_time_secs=1949.456, samples_per_second=None, steps=4257,
        world_size=128, global_batch_size=256,
        eval_accuracy=0.8252960096360008, loss_last=0.006547477561980486)),
    # tracked_stats holds staging (before run_start), per-block throughput
    # and data-loader waits; one block is logged after run_stop: 13 steady
    # blocks (2-14) in the mean, not the staging record's skip.
    ('openfold_nvidia_v3.0_eos_n260.log', dict(
        run_time_secs=502.748, samples_per_second=377.163,
        throughput_records=14, world_size=2080, global_batch_size=256,
        eval_accuracy=0.8044425807065434, losses_finite=None)),
    # Only a staging record: no training throughput.
    ('openfold_clemson_v3.0_18xr750.log', dict(
        run_time_secs=15514.903, samples_per_second=None,
        throughput_records=0, world_size=36, global_batch_size=144,
        eval_accuracy=0.8014199387696054)),
    # HPE+LBNL, 224 nodes x 4 A100, asynchronous evaluation as NVIDIA's:
    # run_stop falls inside the 14th block, whose epoch_stop and rate come
    # after it (out). run time (1696464144138 - 1696463234097) / 1000; the
    # last of 14 eval_accuracy before run_stop; 13 epoch_stop before it
    # (epoch_num counts samples: 40 steps x 218); samples/s: the mean of
    # the tracked_stats throughput of blocks 2-13 (the data loader's
    # avg_perf_next_batch records are not rates).
    ('openfold_hpe_lbnl_v3.0_perlmutter_n224.log', dict(
        run_time_secs=910.041, eval_accuracy=0.805123946401808, epochs=13,
        throughput_records=13, samples_per_second=145.27714708179494,
        world_size=896, global_batch_size=218, steps=None,
        losses_finite=None, status='success')),
    # TACC Lonestar6, 32 nodes x 3 A100, synchronous evaluation after each
    # 40-step block and no rate logged: no samples/s. run time
    # (1696449064146 - 1696439580652) / 1000, 2 h 38 min; the last of 28
    # eval_accuracy; 28 epoch_stop; gradient accumulation 2 (logged).
    ('openfold_tacc_v3.0_lonestar6_n32.log', dict(
        run_time_secs=9483.494, eval_accuracy=0.8032383056150543,
        epochs=28, throughput_records=0, samples_per_second=None,
        world_size=96, global_batch_size=96, status='success')),
    # Training goes on for 7 epochs after run_stop (the target, eval_error
    # <= 0.124, met at epoch 23; epochs 24-30 end at 0.388): the run is
    # lines 23-164. run time (1695882519071 - 1695882218552) / 1000; the
    # last eval_error before run_stop (line 163); 23 epoch_stop and 23
    # tracked_stats before it; samples/s: the mean of tracked_stats 2-23.
    ('cosmoflow_hpe_lbnl_v3.0_perlmutter_n128.log', dict(
        run_time_secs=300.519, eval_error=0.12198171019554138, epochs=23,
        throughput_records=23, samples_per_second=43598.767044731714,
        world_size=512, global_batch_size=512, status='success')),
    # Each epoch's rate logged twice, as `throughput` and as tracked_stats:
    # 9 records, not 18 (test_deepcam_rate_logged_twice_is_one_record).
    # run time (1662603896979 - 1662603115054) / 1000; the last of 9
    # eval_accuracy; epoch_stop's step_num 4257; 32 nodes x 4.
    ('deepcam_dell_v3.0_32xxe8545.log', dict(
        run_time_secs=781.925, samples_per_second=2857.744850160613,
        throughput_records=9, epochs=9, steps=4257, world_size=128,
        global_batch_size=256, eval_accuracy=0.8210175633430481,
        loss_last=0.00614505261182785, status='success')),
    # No throughput and no scale in MLLOG (the non-MLLOG summary's 885
    # sequences/s counts max_steps, not the steps trained: not read).
    ('bert_dell_v1.0_dss8440.log', dict(
        run_time_secs=3954.25, samples_per_second=None, world_size=None,
        global_batch_size=256, eval_accuracy=0.7202397584915161,
        status='success')),
    # 13 in-run records; the summary record after run_stop is not a step.
    ('bert_asustek_v4.0_esc_n8a_excerpt.log', dict(
        run_time_secs=260.264, samples_per_second=7509.268,
        throughput_records=13, global_batch_size=768,
        eval_accuracy=0.7202143669128418)),
    # BERT, Training v2.0, each line prefixed by its rank (srun -l: `0: `),
    # init_start once per rank. run time (1652313477788 - 1652312138996)
    # / 1000; the last of 21 eval_accuracy before run_stop (its target
    # 0.720); no rate logged.
    ('bert_azure_v2.0_nd96amsr_n1_excerpt.log', dict(
        run_time_secs=1338.792, eval_accuracy=0.7200462222099304,
        samples_per_second=None, throughput_records=0, epochs=1,
        global_batch_size=448, world_size=None, benchmark='bert',
        status='success')),
    # BERT on 32 CPU ranks (Sapphire Rapids), Training v3.0, prefix `[0] `:
    # run time (1683374156482 - 1683368595808) / 1000; the last of 20
    # eval_accuracy; no rate logged.
    ('bert_intel_v3.0_spr_8nodes_excerpt.log', dict(
        run_time_secs=5560.674, eval_accuracy=0.7200835943222046,
        samples_per_second=None, throughput_records=0,
        global_batch_size=2048, status='success')),
    # BERT, Training v4.0: a tracked_stats per eval block (19 in the run)
    # and a run summary logged after run_stop at run_stop's millisecond,
    # which is out. run time (1713941319422 - 1713940634126) / 1000;
    # samples/s: the mean of the in-run tracked_stats 2-19.
    ('bert_fujitsu_v4.0_gx2560m7_excerpt.log', dict(
        run_time_secs=685.296, eval_accuracy=0.7203614711761475,
        samples_per_second=4170.23789991433, throughput_records=19,
        global_batch_size=896, status='success')),
])
def test_mlperf_result_logs(name, expected):
    m = mlperf(name)
    for key, value in expected.items():
        if isinstance(value, float):
            assert m[key] == approx(value, rel=1e-6), key
        else:
            assert m[key] == value, key


def test_mlperf_energy_window_is_the_steady_training_records():
    # OpenFold NVIDIA: from the first in-run block record to the last, not
    # run_start..run_stop (which holds evaluations).
    events = mllog.parse_events(read_data(
        'mllog', 'mlperf', 'openfold_nvidia_v3.0_eos_n260.log'))
    start, stop = mllog.extract_metrics(read_data(
        'mllog', 'mlperf', 'openfold_nvidia_v3.0_eos_n260.log'))['timed_window']
    run = [e['time_ms'] / 1000 for e in events
           if e['key'] in ('run_start', 'run_stop')]
    assert run[0] < start < stop < run[1]


@pytest.mark.parametrize('name, precision', [
    ('openfold_nvidia_v3.0_eos_n260.log', 'bf16'),
    ('openfold_hpe_lbnl_v3.0_perlmutter_n224.log', 'bf16'),
    ('openfold_tacc_v3.0_lonestar6_n32.log', 'tf32'),
    ('openfold_clemson_v3.0_18xr750.log', 'tf32'),
])
def test_openfold_precision_as_logged(name, precision):
    # The `precision` event each submitter logs, as hpctestlib_ml/
    # precisions.py names them for OpenFold (alphafold2's note).
    events = mllog.parse_events(read_data('mllog', 'mlperf', name))
    assert mllog.values(events, 'precision') == [precision]


def test_deepcam_rate_logged_twice_is_one_record():
    # Dell's DeepCAM (hpc_results_v3.0 Dell/benchmarks/deepcam/.../driver/
    # trainer.py, lines 610-612) logs one variable per epoch as a
    # `throughput` event (epoch_num, step_num) and as tracked_stats
    # (epoch, step). By hand: the `throughput` events' values, the first
    # (the 380 s warm-up epoch, 318 samples/s) dropped, averaged.
    name = 'deepcam_dell_v3.0_32xxe8545.log'
    events = mllog.parse_events(read_data('mllog', 'mlperf', name))
    rates = [e['value'] for e in events if e['key'] == 'throughput']
    copies = [e['value']['throughput'] for e in events
              if e['key'] == 'tracked_stats']
    assert rates == copies and len(rates) == 9
    assert rates[0] == approx(318.2936730220408)
    assert mlperf(name)['samples_per_second'] == approx(
        sum(rates[1:]) / 8, rel=1e-12)
    # Counted twice, the warm-up's copy stayed in the mean: 2708.4, 5% low.
    assert sum(rates[1:]) / 8 == approx(2857.744850160613)


def test_mlperf_quality_is_the_runs_not_the_logs_last():
    # HPE+LBNL CosmoFlow v3.0: after run_stop, epochs 24-30 evaluate to
    # eval_error 0.388 (above CosmoFlow's 0.124 target) and the log ends
    # there; MLPerf's RCP checker takes the last eval before run_stop.
    text = read_data('mllog', 'mlperf',
                     'cosmoflow_hpe_lbnl_v3.0_perlmutter_n128.log')
    assert mllog.last_value(mllog.parse_events(text), 'eval_error') == \
        approx(0.3878483772277832)
    m = mllog.extract_metrics(text)
    assert m['eval_error'] == approx(0.12198171019554138)
    assert m['eval_error'] <= 0.124
    assert m['epochs'] == 23


def megatron_log(name):
    return read_data('megatron', 'public', name)


@pytest.mark.parametrize('name, skipped', [
    ('faib_gpt3_7b_core_r080_1node.log', 16),
    ('faib_gpt3_7b_core_r080_2node.log', 15),
    ('aws_gpt3_k8s_all_skipped.log', 3),
    ('law_qa_tiny_all_skipped_upstream.log', 5),
    ('nccl743_bert_first_interval_skipped.log', 10),
])
def test_megatron_skipped_intervals_are_not_nan(name, skipped):
    '''fp16 loss-scale warm-up: intervals whose iterations were all skipped
    print no loss; that is not a non-finite loss.'''
    m = megatron.extract_metrics(megatron_log(name))
    assert m['loss_all_finite'] is True
    assert m['skipped_iterations'] == skipped and m['nan_iterations'] == 0


def test_megatron_real_nan_is_still_found():
    # A NaN average is dropped from the line although nothing was skipped.
    m = megatron.extract_metrics(megatron_log('megds434_nan_loss_dropped.log'))
    assert m['loss_all_finite'] is False


@pytest.mark.parametrize('name, seq, tokens_per_second, printed, loss', [
    # 1024 x 2048 / mean of iterations 20-100 (12.085 s).
    ('faib_gpt3_7b_core_r080_1node.log', 2048, 173_535, 876.37, 5.847192),
    # 96 x 2048 / mean of intervals 20-50 (5.407 s); jubench reports
    # 36,055 tokens/s over a longer run; JUBE's own mean, the first
    # interval included, is 34,063 on these 5 lines.
    ('jubench_175B_description.log', 2048, 36_362, 135.855, 8.11027),
    # 1024 x 2048 / mean of intervals 20-50 (35.135 s); the fifth line is
    # cut after `lm loss: 8.` in the README: its loss is not read.
    ('jubench_13B_readme.log', 2048, 59_688, 203.563, 8.486469),
    # One interval: kept (nothing to skip); 2048 x 2048 / 105.22 s.
    ('bigscience_tr11_176B_chronicles.log', 2048, 39_862, 149.02, 2.463556),
    # Megatron-Core MoE (64 experts, EP 4), late-2024 main format with
    # `throughput per GPU` and `load_balancing_loss`, logged every 20
    # iterations: each line's time is its interval's mean per iteration
    # (training.py: elapsed / iterations since the last log), so 64 x 2048
    # (--seq-length in the notes) / the mean of intervals 40-240 (0.62425 s).
    ('moe64_ep4_notes_2024_10.log', 2048, 209_966, 31.14545, 6.588043),
    # Megatron-DeepSpeed (consumed tokens, actual seqlen, tgs): 1536 x 2048
    # / the mean of iterations 6-10 (346.198 s); its own samples per second
    # (4.42-4.45) x 2048 agree, and tgs 142 x 64 GPUs too.
    ('megds_tgs_1536gbs_stuck_loss.log', 2048, 9_086.5, 152.696, 10.99972),
])
def test_megatron_throughput(name, seq, tokens_per_second, printed, loss):
    m = megatron.extract_metrics(megatron_log(name), seq_length=seq)
    assert m['tokens_per_second'] == approx(tokens_per_second, rel=1e-4)
    assert m['printed_tflops_per_gpu'] == approx(printed, rel=1e-4)
    assert m['loss_last'] == approx(loss, rel=1e-6)


def test_megatron_loss_named_loss_not_lm_loss():
    """Megatron-Core DiT (an mcore-vfm example, 8 GPUs, bf16): training_log
    prints every key of the model's loss dict, here ``loss:``, not ``lm
    loss:``. Read as no loss at all, a line that advanced its iterations
    would pass for a dropped NaN. Time: the mean of intervals 300-800
    (1530.567 ms; the timestamps agree: 09:50:49 to 10:06:08 is 919 s for
    600 iterations)."""
    m = megatron.extract_metrics(
        megatron_log('mcore_dit_bf16_8gpu_flash_attn_2024_11.log'))
    assert m['loss_all_finite'] is True
    assert m['loss_last'] == approx(0.1734681)
    assert len(m['losses']) == 7
    assert m['time_per_iteration_secs'] == approx(1.5305667, rel=1e-6)
    assert m['printed_tflops_per_gpu'] == approx(458.3 / 6)
    start, stop = m['timed_window']
    assert stop - start == 919


def test_megatron_deepspeed_bf16_nan_without_counters():
    """bigscience Megatron-DeepSpeed issue #396: bf16 (loss scale 1.0), grad
    norm nan, no ``lm loss`` and both counters 0: Megatron counts NaN only
    in iterations the fp16 scaler skipped, and drops a NaN average from the
    line (``if avg > 0.0``), so the missing loss is the NaN. Its rate is
    still read: 8 x 2048 (actual seqlen) / the mean of iterations 5427-5428
    (4.2275 s), as its samples per second (1.893, 1.892) x 2048."""
    m = megatron.extract_metrics(
        megatron_log('bigscience_megds396_bf16_grad_norm_nan.log'),
        seq_length=2048)
    assert m['loss_all_finite'] is False
    assert m['skipped_iterations'] == 0 and m['nan_iterations'] == 0
    assert m['tokens_per_second'] == approx(8 * 2048 / 4.2275)
    assert m['printed_tflops_per_gpu'] == approx((78.77 + 78.71) / 2)


def test_megatron_checkpoint_save_is_outside_the_iteration_times():
    """ms-swift SFT of Qwen2-0.5B on Megatron (mid-2024 format: timestamps,
    no throughput field), global batch 8: a 30.4 s save-checkpoint after
    iteration 100 is not in interval 110's 719.8 ms but is in the
    timestamps (15:27:27 to 15:28:05). Time per iteration: the mean of
    intervals 20-120 (728.79 ms), the 8.2 s first interval skipped; the
    window (15:26:21 to 15:28:12, 111 s) holds 110 x 0.729 s + the save."""
    m = megatron.extract_metrics(
        megatron_log('ms_swift_qwen2_0p5b_sft_ckpt_save_2024_07.log'))
    assert m['iterations'] == 12 and m['iteration_last'] == 120
    assert m['time_per_iteration_secs'] == approx(8016.7 / 11 / 1000)
    assert m['loss_last'] == approx(0.9523046)
    assert m['printed_tflops_per_gpu'] is None
    start, stop = m['timed_window']
    assert stop - start == 111


def test_megatron_lines_wrapped_by_a_terminal():
    '''A copy from an 80-column-less terminal breaks every line inside
    `load_balancing_loss`: the time, batch and `lm loss` before the break
    are read, the cut field and the continuation are not (so no skip or
    NaN counts). 128 x 256 (--seq-length) / mean of iterations 2-5
    (2.040675 s).'''
    m = megatron.extract_metrics(
        megatron_log('moe8_ep2_wrapped_lines_2024_10.log'), seq_length=256)
    assert m['iterations'] == 5 and m['iteration_last'] == 5
    assert m['tokens_per_second'] == approx(16_057.43, rel=1e-5)
    assert m['loss_last'] == approx(11.77305)
    assert m['loss_all_finite'] is True


def test_megatron_current_upstream_timestamps_give_the_window():
    # "[2024-04-... 02:59:36]" and newer "[... .123456]" both parse.
    m = megatron.extract_metrics(megatron_log(
        'nvidia_issue756_mixtral_8x7b_h100.log'))
    assert m['timed_window'] is not None
    line = (' [2025-03-01 12:00:00.123456] iteration       10/     100 | '
            'elapsed time per iteration (ms): 1000.0 | global batch size: '
            '    8 | lm loss: 1.0E+00 | number of skipped iterations:   0 | '
            'number of nan iterations:   0 |\n')
    later = line.replace('12:00:00.123456', '12:00:09.5').replace(
        '   10/', '   20/')
    start, stop = megatron.extract_metrics(line + later)['timed_window']
    assert stop - start == 9


def test_megatron_gqa_swiglu_shape_from_the_arguments_block():
    """A Llama-style model on 8 MI300X (AMD's rocm/megatron-lm v25.9):
    --group-query-attention --num-query-groups 24 of 96 heads, --swiglu,
    --ffn-hidden-size 21504, 56 layers, hidden 6144, sequence 8192, padded
    vocabulary 50688, TP 4 x PP 2, global batch 512, selective
    recomputation. The program printed 248.4-251.4 TFLOP/s/GPU in
    iterations 2-17, 250.5 on average: its formula counts the s x s
    attention whole, as the suite's. Read as multi-head GeLU (the parser
    before) the figure was 12.6% low (218.8)."""
    m = megatron.extract_metrics(megatron_log(
        'rocm_mi300x_gqa24_swiglu_56l_2025_11.log'))
    assert m['iterations'] == 17 and m['iteration_last'] == 17
    # 512 x 8192 tokens / the mean of iterations 2-17 (419.809 s).
    assert m['tokens_per_second'] == approx(512 * 8192 / 419.80869375)
    assert m['printed_tflops_per_gpu'] == approx(250.5)
    assert m['tflops_per_gpu'] == approx(250.5, rel=2e-3)
    assert ('GQA 24 query groups of 96 heads, SwiGLU ffn 21504'
            in m['flops_formula'])
    assert 'arguments block' in m['flops_formula']


def test_megatron_moe_shape_from_the_echoed_command_line():
    """Megatron-Core MoE notes of 2024-10 (64 experts, top-1, EP 8, 8 A100,
    global batch 64): the shape is in the echoed MODEL_ARGS and MOE_ARGS
    lines (hidden 512, 24 layers, 4 heads, GQA 1 group, --swiglu, ffn
    1792), the dump shows only MoE arguments. The vocabulary is the Llama
    3.1 tokenizer's (a file): not in the log, so no TFLOP/s figure, and the
    figures say so."""
    text = megatron_log('moe64_top1_ep8_command_line_2024_10.log')
    stated = megatron_args.stated(text)
    assert {k: stated.get(k) for k in (
        'num_layers', 'hidden_size', 'num_attention_heads', 'seq_length',
        'ffn_hidden_size', 'group_query_attention', 'num_query_groups',
        'swiglu', 'num_experts', 'moe_router_topk')} == dict(
        num_layers=24, hidden_size=512, num_attention_heads=4,
        seq_length=2048, ffn_hidden_size=1792, group_query_attention=True,
        num_query_groups=1, swiglu=True, num_experts=64, moe_router_topk=1)
    assert stated.sources['hidden_size'] == 'command line'
    m = megatron.extract_metrics(text)
    assert m['tflops_per_gpu'] is None
    assert m['flops_formula'].startswith('none: the log does not state '
                                         'padded vocabulary')
    # 64 x 2048 / the mean of intervals 40-220 (1592.94 ms).
    assert m['tokens_per_second'] == approx(64 * 2048 / 1.59294)


def test_megatron_moe_formula_reproduces_the_programs_printed_tflops():
    """The same run with the vocabulary its tokenizer has (Llama 3.1:
    128,256 tokens, already a multiple of 128): each interval's printed
    TFLOP/s/GPU (11.5 ... 12.7) is tokens/s x FLOPs per token / 8 GPUs to
    its printed digit, top-1 routing to experts of ffn 1792 in every
    layer."""
    per_token = flops.megatron_gpt_flops_per_token(
        24, 512, 2048, 128256, ffn_hidden=1792, query_groups_ratio=1 / 4,
        swiglu=True, moe=flops.MoE(layers=24, routed=1, ffn_hidden=1792))
    steps = megatron.parse_iterations(megatron_log(
        'moe64_top1_ep8_command_line_2024_10.log'))
    for step in steps[1:]:
        computed = 64 * 2048 / step['time_s'] * per_token / 8 / 1e12
        assert computed == approx(step['printed_tflops'], abs=0.05)


@pytest.mark.parametrize('name, job, per_gpu, step, devices', [
    # 2 Horovod workers each print the job's 264.26: not 528.52.
    ('mpi_operator_hvd2_tf110.log', 264.26, 132.13, 128 / 264.26, 2),
    ('mpi_operator_sc19_hvd2_tf114.log', 22.64, 11.32, 128 / 22.64, 2),
    # 8 workers, 512 global / 64 per device; one total shown.
    ('batchai_hvd8_resnet101.log', 224.96, 28.12, 512 / 224.96, 8),
    # One process, --num_gpus=2: its total is over both GPUs.
    ('t4_numgpus2_parameter_server.log', 242.60, 121.30, 128 / 242.60, 2),
    # One worker; no "Batch size" lines in the excerpt: no step time.
    ('horovod466_np1_resnet101.log', 204.75, 204.75, None, 1),
    # ROCm 3.0, tensorflow-rocm 2.0.1, one Vega 56 (--num_gpus=1): no header
    # in the excerpt, so no batch and no step time.
    ('rocm173_vega56_rocm30_tf201.log', 117.61, 117.61, None, 1),
    # CPU, MKL build (--device=cpu --mkl=True, NCHW), forward only: one
    # device ("32.0 per device" of 32 global), 32 / 16.04 s a step.
    ('cpu_mkl_tf15_resnet50_forward_only.log', 16.04, 16.04, 32 / 16.04, 1),
])
def test_tf_cnn_benchmarks_totals_are_the_jobs_rate(name, job, per_gpu, step,
                                                    devices):
    m = tf_cnn_benchmarks.extract_metrics(
        read_data('tf_cnn_benchmarks', 'public', name))
    assert m['images_per_second'] == approx(job)
    assert m['images_per_second_per_gpu'] == approx(per_gpu)
    assert m['time_per_step_secs'] == (approx(step) if step else None)
    assert m['devices'] == devices


def test_tf_cnn_benchmarks_steps_without_a_total():
    m = tf_cnn_benchmarks.extract_metrics(read_data(
        'tf_cnn_benchmarks', 'public', 'benchmarks30_numgpus4_steps_only.log'))
    assert m['images_per_second'] is None and m['steps'] == 50


@pytest.mark.parametrize('name, window, total, throughput, per_gpu', [
    # Every step logged (MMoCLIP's rule): the sum of Batch (t) after the
    # first line, the mean of the logged rates.
    ('jubench_mmoclip_description.log', 1, 6.655 + 6.466,
     (2461.78 + 2533.71) / 2, (76.9308 + 79.1783) / 2),
    # Every 128 steps, global batch 8192: each Batch (t) is a 128-step
    # mean (595 s and 576 s by the timestamps), /s only the last batch.
    ('superclass11_clip_b16_8xv100.log', 128, 128 * (4.644 + 4.507),
     2 * 128 * 8192 / (128 * (4.644 + 4.507)), None),
    # OpenCLIP 1.x, every 100 steps of 64: 600 steps after the first line.
    ('negclip_bows27_openclip1x.log', 100, 100 * 2.953,
     64 * 600 / (100 * 2.953), None),
])
def test_open_clip_log_windows(name, window, total, throughput, per_gpu):
    m = open_clip.extract_metrics(read_data('open_clip', 'public', name))
    assert m['log_every_n_steps'] == window
    assert m['total_time_secs'] == approx(total, rel=1e-6)
    assert m['throughput_avg'] == approx(throughput, rel=1e-6)
    if per_gpu:
        assert m['throughput_per_gpu_avg'] == approx(per_gpu, rel=1e-6)


def test_open_clip_prefixed_lines_keep_the_timed_window():
    m = open_clip.extract_metrics(read_data(
        'open_clip', 'public', 'superclass11_clip_b16_8xv100.log'))
    start, stop = m['timed_window']
    assert stop - start == (58 - 39) * 60 + 49 - 18    # 04:39:18-04:58:49


@pytest.mark.parametrize('name, expected', [
    # run_clm gpt2 on wikitext-2-raw-v1, zero-shot: perplexity exp(3.422).
    ('gpt2_wikitext2_zeroshot_eval_4x4090_dp.log',
     dict(eval_loss=3.422, perplexity=30.6306)),
    # 200 steps x 8 samples / 72.41 s = 22.09: Trainer's figure.
    ('gpt2_wikitext2_ddp2_max200_p2p_off.log',
     dict(train_samples_per_second=22.094, train_runtime=72.41,
          train_loss=3.2972)),
    ('ezpz_llama32_1b_aurora.log',
     dict(train_samples_per_second=70.544, train_runtime=27.21,
          eval_loss=1.6779, perplexity=5.3542)),
    # Over an hour: 1:19:45.25 is 4785.25 s (the dict's 4785.2548, rounded
    # by timedelta's print); tables indented 4 spaces (a notebook's output).
    ('clip_finetune_notebook_1h19m.log',
     dict(train_samples_per_second=5.476, train_runtime=4785.25,
          train_loss=1.865, eval_loss=3.8813)),
    # 1:31:48.89 = 5508.89 s; 23808 samples x 4 epochs / 5508.89 s = 17.287
    # (Trainer's speed_metrics); tab-indented; the eval table holds
    # `eval_F1-score`, a key that is not \w+ (compute_metrics' name).
    ('vibe_finetune_tab_indented_1h31m.log',
     dict(train_samples_per_second=17.287, train_runtime=5508.89,
          train_loss=0.371, eval_loss=3.5356)),
    # run_clm.py on a TPU v5p pod: every line behind gcloud's `[worker :11]`
    # (tpu-vm ssh --worker=all). 20 steps x 512 (the recipe's MAX_STEPS and
    # BATCH_SIZE) / 808.7671 s (Trainer's dict) = 12.661; the table's
    # runtime is 0:13:28.76, its loss 9.4205 (the dict's 9.420475).
    ('tpu_v5p_llama2_7b_run_clm_worker_label.log',
     dict(train_samples_per_second=12.661, train_runtime=808.76,
          train_loss=9.4205)),
    # `[worker :0]` on Trillium: 3.65 x 0:46:45.60 (2805.6 s) = 10,240
    # samples, Trainer's 20 steps x 512 again.
    ('tpu_v6e_llama3_70b_worker_label.log',
     dict(train_samples_per_second=3.65, train_runtime=2805.6,
          train_loss=9.278)),
    # Cloud Logging's export of a GKE job: severity, time stamp and the
    # container's label before each line, the rows' indentation gone;
    # 9.515 x 0:08:58.11 (538.11 s) = 5,120 samples.
    ('tpu_v6e_llama3_8b_gke_log_explorer.log',
     dict(train_samples_per_second=9.515, train_runtime=538.11,
          train_loss=11.6602)),
    # transformers 4.3 printed steps/s as "train_samples_per_second" in a
    # dict: no table, so no figure rather than a wrong one.
    ('mlengineering_disable_nvlink_tf430.log',
     dict(train_samples_per_second=None, train_runtime=None)),
])
def test_hf_trainer_tables(name, expected):
    m = hf_trainer.extract_metrics(read_data('hf_trainer', 'public', name))
    for key, value in expected.items():
        assert m[key] == (approx(value) if value is not None else None), key
