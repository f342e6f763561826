"""GPT-2's step times cover the whole run (review finding 23).

Trainer calls ``on_step_end`` before it logs the step (``loss.item()``)
and fetches the next batch before ``on_step_begin``: timed from begin to
end, that time fell outside every step and the steps looked a few %
faster than the run. Each step now runs from the previous step's end to
its own, and the gap before ``on_step_begin`` is the data time.
"""
import json
import sys
import types

from conftest import REPO

sys.path.insert(0, str(REPO / 'src'))


def test_steps_are_contiguous_and_the_gap_is_data_time(monkeypatch, capsys):
    import gpt2_finetune.__main__ as program
    clock = {'now': 100.0}
    monkeypatch.setattr(program, 'time', types.SimpleNamespace(
        perf_counter=lambda: clock['now'], time=lambda: clock['now']))
    syncs = []
    callback = program.step_times(8, True, 0, lambda: syncs.append(1))
    state = types.SimpleNamespace(global_step=0, max_steps=3)
    # (gap before the step: batch fetch and the last step's logging,
    #  the step's own compute)
    for gap, compute in ((1.0, 5.0), (0.5, 2.0), (0.25, 2.0)):
        clock['now'] += gap
        callback.on_step_begin(None, state, None)
        clock['now'] += compute
        state.global_step += 1
        callback.on_step_end(None, state, None)
    callback.on_train_end(None, state, None)
    out = capsys.readouterr().out
    times = [float(t) for t in
             __import__('re').findall(r'step \d/3 time ([\d.]+) s', out)]
    assert times == [5.0, 2.5, 2.25]
    timing = json.loads(out.split('[hpcml] timing ', 1)[1].splitlines()[0])
    assert timing == {'rank': 0, 'steps': 2, 'data_s': 0.75,
                      'compute_s': 4.0}
    assert len(syncs) == 6          # before each begin and each end
