"""The program of the check of silent data corruption (src/sdc): what
every rank computes, digests and sends, how a difference is measured, and
the program on three CPU ranks with one made wrong from outside the
suite's code (tests/sdc_fault.py)."""
import json
import os
import subprocess
import sys

import pytest

import sdc_fault
from conftest import BIN, REPO, run_module
from hpctestlib_ml import answers, registry
from hpctestlib_ml.parsers import hpcml_records

sys.path.insert(0, str(REPO / 'src'))
import sdc  # noqa: E402


def test_the_majority_s_result_goes_to_every_rank_that_differs():
    assert sdc.exchange_plan(['a', 'a', 'a']) == []
    assert sdc.exchange_plan(['a', 'a', 'b']) == [(0, 2)]
    assert sdc.exchange_plan(['b', 'a', 'a', 'c', 'a']) == [(1, 0), (1, 3)]


def test_without_a_majority_each_side_measures_itself_against_the_other():
    '''Two ranks that disagree: each receives the other's result, so that
    whichever is wrong has measured itself against the right one.'''
    assert sdc.exchange_plan(['a', 'b']) == [(0, 1), (1, 0)]
    assert sdc.exchange_plan(['a', 'a', 'b', 'b']) == [(0, 2), (0, 3),
                                                       (2, 0)]


def test_a_flipped_bit_is_one_element_and_its_relative_error():
    import torch
    right = torch.tensor([1.5, -2.0, 3.25, 0.0])
    wrong = right.clone()
    wrong[2:3].view(torch.int32).bitwise_xor_(1 << 10)
    differ, elements, worst = sdc.difference(wrong, right)
    assert (differ, elements) == (1, 4)
    assert worst == pytest.approx(abs(wrong[2] - 3.25) / 3.25)
    assert 6e-5 < worst < 1.3e-4
    assert sdc.difference(right, right.clone()) == (0, 4, 0.0)
    # Against a right value of 0, or a value that is not finite: inf.
    zero = right.clone()
    zero[3] = 1e-30
    assert sdc.difference(zero, right)[2] == float('inf')
    nan = right.clone()
    nan[0] = float('nan')
    assert sdc.difference(nan, right) == (1, 4, float('inf'))


def test_a_digest_is_of_the_bytes_as_the_device_left_them():
    import torch
    x = torch.arange(8, dtype=torch.float32)
    assert sdc.digest(x) == sdc.digest(x.clone())
    assert len(sdc.digest(x)) == sdc.DIGEST_CHARS
    flipped = x.clone()
    flipped.view(torch.int32)[5] ^= 1
    assert sdc.digest(flipped) != sdc.digest(x)
    assert sdc.digest(x.to(torch.bfloat16)) != sdc.digest(x)


def test_each_product_has_its_own_seed_whatever_precisions_run():
    seeds = {sdc.operand_seed(p, k) for p in sdc.PRECISIONS
             for k in (1, 2, 3)}
    assert len(seeds) == 12


def test_the_computation_is_made_deterministic():
    import torch
    env = {}
    try:
        sdc.make_deterministic(env)
        assert env == {'CUBLAS_WORKSPACE_CONFIG': ':4096:8'}
        assert torch.are_deterministic_algorithms_enabled()
        assert torch.backends.cudnn.deterministic
        assert not torch.backends.cudnn.benchmark
    finally:
        torch.use_deterministic_algorithms(False)
        torch.backends.cudnn.deterministic = False


def test_sizes_run_the_same_code_path_and_every_rank_twice():
    sizes = registry.get('sdc').sizes
    assert sizes['tiny']['matrix_size'] < sizes['benchmark']['matrix_size']
    assert sizes['tiny']['steps'] == sizes['benchmark']['steps'] == 2


def test_three_ranks_agree_and_the_one_made_wrong_is_named(tmp_path):
    '''Rank 2's fp32 product #2 made wrong by one bit from outside the
    suite's code (tests/sdc_fault.py): ranks 0 and 1 compute the same
    digests bit for bit in both repetitions, rank 2 differs in that
    product alone, measured against the majority's result, and the
    verdict and hpcml triage name it.'''
    n = 128
    inject = sdc_fault.write(tmp_path / 'inject',
                             "os.environ.get('RANK') == '2'", n)
    proc = run_module(tmp_path, 'sdc', '--cpu', '--matrix-size', n,
                      '--products', 2, '--width', 32, '--batch', 8,
                      '--threads', 1, procs=3,
                      env={'PYTHONPATH': f'{inject}:{REPO / "src"}'})
    text = proc.stdout
    records = hpcml_records.records(text, 'answer')
    assert len(records) == 6
    digests = {(r['rank'], r['repetition']): r['digests'] for r in records}
    right = digests[0, 1]
    assert set(right) == {'matmul fp32 #1', 'matmul fp32 #2',
                          'step fp32 loss', 'step fp32 grads',
                          'step fp32 weights'}
    assert all(digests[rank, rep] == right for rank in (0, 1)
               for rep in (1, 2))
    for rep in (1, 2):
        assert {item for item, d in digests[2, rep].items()
                if d != right[item]} == {'matmul fp32 #2'}
    errors = hpcml_records.records(text, 'answer_error')
    assert {(e['rank'], e['against'], e['item'], e['differ'])
            for e in errors} == {(2, 0, 'matmul fp32 #2', 1)}
    assert all(6e-5 < e['max_rel_error'] < 1.3e-4 for e in errors)
    assert all(e['elements'] == n * n for e in errors)
    found = answers.log_verdict(text)
    assert found.suspects == [(2, records[0]['node'])]
    assert "differs from the majority's (2 of 3 ranks)" in found.wrong
    log = tmp_path / 'job.out'
    log.write_text(text)
    out = subprocess.run([str(BIN / 'hpcml'), 'triage', str(log)],
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ})
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)['category'] == 'hardware'
    assert json.loads(out.stdout)['rank'] == '2'
