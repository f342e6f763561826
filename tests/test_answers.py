"""How the ranks' answers are judged (hpctestlib_ml.answers), from the
records the check of silent data corruption prints (src/sdc): the rank
off the majority or off the known-good digest named with what differed
and by how much, two ranks that disagree both suspects, a computation
that is not deterministic or ranks that cannot be compared told apart
from a wrong node; the same from a log alone (hpcml triage), the check's
parser, and the known-good digests hpcml references keeps."""
import json

import pytest

from hpctestlib_ml import answers, triage
from hpctestlib_ml.history_refs import derive, lookup, store
from hpctestlib_ml.parsers import sdc as parser
from hpctestlib_ml.report.history import Metric, Run


def record(rank, digests, repetition=1, node=None, threads=1, isa='AVX2',
           version=1):
    return {'rank': rank, 'repetition': repetition,
            'node': node or f'n{rank + 1}', 'threads': threads, 'isa': isa,
            'version': version, 'seconds': 0.1, 'digests': digests}


GOOD = {'matmul fp32 #1': 'aa', 'matmul fp32 #2': 'bb',
        'step fp32 loss': 'cc'}
BAD = dict(GOOD, **{'matmul fp32 #2': 'xx'})
CPU = {'kind': 'cpu', 'name': 'x86_64'}


def devices(count):
    return {rank: dict(CPU, rank=rank) for rank in range(count)}


def answered(*per_rank, repetitions=2, **fields):
    '''The records of ranks computing *per_rank* digests in every
    repetition.'''
    return [record(rank, digests, repetition, **fields)
            for repetition in range(1, repetitions + 1)
            for rank, digests in enumerate(per_rank)]


def error(rank, against, repetition=1, item='matmul fp32 #2'):
    return {'rank': rank, 'against': against, 'repetition': repetition,
            'item': item, 'differ': 1, 'elements': 65536,
            'max_rel_error': 1.22e-4}


def test_ranks_that_agree_give_the_answer():
    found = answers.verdict(answered(GOOD, GOOD, GOOD), [], devices(3))
    assert found.problems == [] and found.wrong == ''
    assert found.digest == answers.combined(GOOD, 1)
    assert found.digest.startswith('v1:')


def test_the_rank_off_the_majority_is_named_with_what_and_how_much():
    found = answers.verdict(answered(GOOD, GOOD, BAD),
                            [error(2, 0, 1), error(2, 0, 2)], devices(3))
    assert found.wrong == (
        'silent data corruption: rank 2 on n3 (cpu x86_64 AVX2, 1 thread): '
        'matmul fp32 #2 (1 of 65536 elements, max relative error 0.00012) '
        "differs from the majority's (2 of 3 ranks); bit-identical "
        'elsewhere')
    assert found.problems == [found.wrong]
    assert found.suspects == [(2, 'n3')]
    assert found.digest == answers.combined(GOOD, 1)
    assert triage.problems_category(found.problems) == 'hardware'
    assert answers.named(found.wrong) == [(2, 'n3')]


def test_a_rank_wrong_at_times_is_named_with_the_repetition():
    records = answered(GOOD, GOOD, GOOD)
    records[2] = record(2, BAD)             # rank 2, repetition 1 only
    found = answers.verdict(records, [error(2, 0, 1)], devices(3))
    assert 'rank 2 on n3' in found.wrong
    assert 'matmul fp32 #2 (1 of 65536 elements, max relative error ' \
           '0.00012) in repetition 1 of 2 differs' in found.wrong


@pytest.mark.parametrize('order', [1, -1])
def test_two_ranks_that_disagree_are_both_suspects_without_history(order):
    '''In rank order whatever order the ranks' lines reached the log in
    (the CI of 2026-11-28 read rank 1's first).'''
    found = answers.verdict(answered(GOOD, BAD)[::order],
                            [error(1, 0), error(0, 1)], devices(2))
    assert found.wrong.startswith(
        'silent data corruption: rank 0 on n1 and rank 1 on n2 disagree '
        '(matmul fp32 #2 (1 of 65536 elements, max relative error 0.00012);'
        ' bit-identical elsewhere) with no majority and no known-good '
        'digest of this stack: both are suspects')
    assert 'run it on 3 ranks or more, or derive known-good digests' in \
        found.wrong
    assert found.suspects == [(0, 'n1'), (1, 'n2')]
    assert found.digest == ''


@pytest.mark.parametrize('right, wrong', [(0, 1), (1, 0)])
def test_the_known_good_digest_tells_which_of_two_ranks_is_wrong(right,
                                                                  wrong):
    per_rank = [GOOD, GOOD]
    per_rank[wrong] = BAD
    known = answers.KnownGood(answers.combined(GOOD, 1), 5)
    found = answers.verdict(answered(*per_rank),
                            [error(1, 0), error(0, 1)], devices(2), known)
    assert found.suspects == [(wrong, f'n{wrong + 1}')]
    assert found.wrong.startswith(
        f'silent data corruption: rank {wrong} on n{wrong + 1} (cpu x86_64 '
        f'AVX2, 1 thread): matmul fp32 #2 (1 of 65536 elements, max '
        f'relative error 0.00012) differs from the known-good digest of '
        f'this stack (5 passing runs); bit-identical elsewhere')
    assert found.digest == known.digest


def test_one_rank_is_held_against_the_known_good_digest():
    known = answers.KnownGood(answers.combined(GOOD, 1), 5)
    assert answers.verdict(answered(GOOD), [], devices(1), known).problems \
        == []
    found = answers.verdict(answered(BAD), [], devices(1), known)
    assert found.suspects == [(0, 'n1')]
    assert 'its answer v1:' in found.wrong
    assert 'differs from the known-good digest of this stack' in found.wrong


def test_one_rank_right_in_one_repetition_only_is_named_with_its_item():
    '''The known-good digest computed in repetition 1, not in 2: the
    device is wrong at times, and what differed in repetition 2 is held
    against repetition 1's right items.'''
    known = answers.KnownGood(answers.combined(GOOD, 1), 5)
    found = answers.verdict([record(0, GOOD, 1), record(0, BAD, 2)], [],
                            devices(1), known)
    assert found.suspects == [(0, 'n1')]
    assert 'matmul fp32 #2 in repetition 2 of 2 differs from the ' \
           'known-good digest of this stack (5 passing runs); ' \
           'bit-identical elsewhere' in found.wrong


def test_every_rank_agreeing_on_another_answer_than_the_known_good_one():
    '''A change the provenance does not show, or every node wrong: a
    numerics finding, no node named.'''
    known = answers.KnownGood(answers.combined(BAD, 1), 5)
    found = answers.verdict(answered(GOOD, GOOD), [], devices(2), known)
    assert found.wrong == '' and found.suspects == []
    problem, = found.problems
    assert answers.KNOWN_DIFFERS in problem
    assert triage.problems_category(found.problems) == 'numerics'


def test_a_known_good_digest_of_another_computation_is_not_compared():
    known = answers.KnownGood('v0:' + '0' * 16, 5)
    assert answers.verdict(answered(GOOD, GOOD), [], devices(2),
                           known).problems == []


def test_a_computation_that_is_not_deterministic_blames_no_node():
    records = answered(GOOD, GOOD, repetitions=1) + [
        record(0, BAD, 2), record(1, dict(GOOD, **{'step fp32 loss': 'zz'}),
                                  2)]
    found = answers.verdict(records, [], devices(2))
    problem, = found.problems
    assert problem.startswith('the computation is not deterministic here')
    assert found.wrong == '' and found.suspects == []
    assert triage.problems_category(found.problems) == 'software'


def test_ranks_on_other_threads_or_instructions_are_not_compared():
    records = answered(GOOD) + answered(GOOD)
    for r in records[2:]:
        r.update(rank=1, node='n2', isa='AVX512')
    found = answers.verdict(records, [], devices(2))
    problem, = found.problems
    assert problem.startswith('answers not comparable')
    assert 'rank 1 on n2: cpu x86_64 AVX512, 1 thread' in problem


def test_the_stack_is_the_provenance_a_result_depends_on():
    fields = {'framework_versions': 'torch=2.14.1', 'cuda_version': '13.0',
              'gpu_driver': '', 'env_switches': 'OMP_NUM_THREADS=1',
              'device_ran': 'cpu x86_64 x2', 'nccl_version': '2.30.7'}
    assert answers.stack(fields) == ('torch=2.14.1 | 13.0 | - | '
                                     'OMP_NUM_THREADS=1 | cpu x86_64 x2')
    # NCCL moves no result; an empty field reads the same in a perflog.
    assert answers.stack_id(dict(fields, nccl_version='2.31')) == \
        answers.stack_id(dict(fields, gpu_driver='None'))
    assert answers.stack_id(dict(fields, framework_versions='torch=2.15')) \
        != answers.stack_id(fields)


def log_of(records, errors=()):
    return '\n'.join(
        ['sdc: 2 rank(s), cpu, ...'] +
        [f'[hpcml] device {json.dumps(dict(CPU, rank=r))}'
         for r in sorted({x["rank"] for x in records})] +
        [f'{x["rank"]}: [hpcml] answer {json.dumps(x)}' for x in records] +
        [f'[hpcml] answer_error {json.dumps(e)}' for e in errors] +
        ['[hpcml] timed region 1764000000.000 1764000001.500'])


def test_the_parser_counts_repetitions_ranks_and_the_slowest_rank_s_time():
    log = parser.training_log(log_of(answered(GOOD, GOOD, BAD)))
    assert (log.steps, log.world_size, log.ranks) == (2, 3, {0, 1, 2})
    assert log.figures == {'items': 3, 'answer_s': pytest.approx(0.2)}
    assert log.timed_window == (1764000000.0, 1764000001.5)
    assert parser.training_log('no records').steps is None


def test_triage_of_the_log_alone_names_the_rank_off_the_majority():
    text = log_of(answered(GOOD, GOOD, BAD), [error(2, 0, 1)])
    found = triage.triage(text, exitcode=0)
    assert (found.category, found.rank, found.node) == ('hardware', '2',
                                                        'n3')
    assert found.reason.startswith('silent data corruption: rank 2 on n3')
    assert triage.triage(log_of(answered(GOOD, GOOD))).category is None


def history_run(digest, when, stack='torch=2.14.1', result='pass'):
    return Run(when, 'slurm', 'ci', 'SilentDataCorruption %scale=2_nodes',
               result, {'workload': 'sdc', 'reference_case': CASE,
                        'answer_digest': digest,
                        'framework_versions': stack,
                        'device_ran': 'cpu x86_64 x2'},
               {'answer_s': Metric(0.1 + when / 1e4, 's')})


CASE = 'tiny 2x1 per_task n=256 products=2 model=64x16 precisions=fp32'


def test_each_stack_s_passing_runs_give_its_known_good_digest(tmp_path):
    runs = ([history_run('v1:aaa', t) for t in range(3)] +
            [history_run('v1:bbb', t, stack='torch=2.15') for t in
             range(3, 5)] +
            [history_run('v1:ccc', 5, stack='torch=2.15', result='fail')])
    refs, notes = derive.derive(runs, min_runs=2)
    ref, = refs
    old = answers.stack_id(runs[0].params)
    new = answers.stack_id(runs[3].params)
    assert ref.answers == {
        old: {'digest': 'v1:aaa', 'runs': 3,
              'stack': answers.stack(runs[0].params)},
        new: {'digest': 'v1:bbb', 'runs': 2,
              'stack': answers.stack(runs[3].params)}}
    path = tmp_path / 'sdc.yaml'
    store.merge_into_file(path, 'sdc', refs)
    assert lookup.known_answer(path, 'SilentDataCorruption', 'slurm:ci',
                               CASE, new)['digest'] == 'v1:bbb'
    assert lookup.known_answer(path, 'SilentDataCorruption', 'slurm:ci',
                               CASE, 'nope') is None


def test_a_stack_whose_runs_disagree_or_are_too_few_has_none():
    runs = [history_run('v1:aaa', 0), history_run('v1:aaa', 1),
            history_run('v1:ddd', 2)]
    refs, notes = derive.derive(runs, min_runs=2)
    assert refs[0].answers == {}
    assert any('logged 2 digests (v1:aaa, v1:ddd): no known-good' in n
               for n in notes)
    few = [history_run('v1:aaa', 0), history_run('v1:bbb', 1, 'x'),
           history_run('v1:bbb', 2, 'x')]
    refs, notes = derive.derive(few, min_runs=2)
    assert list(refs[0].answers.values())[0]['digest'] == 'v1:bbb'
    assert any('1 passing runs, 2 needed' in n for n in notes)
    # A new version of the computation: only its own runs count.
    bumped = [history_run('v1:aaa', 0), history_run('v2:eee', 1),
              history_run('v2:eee', 2)]
    refs, _ = derive.derive(bumped, min_runs=2)
    assert list(refs[0].answers.values())[0]['digest'] == 'v2:eee'


