"""The Megatron check's pretrain_gpt.py command against CARAML's own.

CARAML's JUBE file (tests/data/caraml, FZJ-JSC/CARAML
59cba3e4f2c3f12c6dee3b85133122c731909852) is expanded here as JUBE
would for one model size on an NVIDIA system (tag ``A100``): the
parameters whose tags hold, ``$name``/``${name}`` substituted, python-mode
values evaluated, ``$$`` left as the shell's ``$``; then the ``CMD`` its
``preprocess`` step exports. The suite's command must hold every CARAML
argument with CARAML's value, except the documented departures
(``hpctestlib_ml.registry.megatron.caraml.DEPARTURES``), and nothing else.
"""
import re

import pytest
import yaml

from conftest import DATA
from hpctestlib_ml.registry.megatron import caraml
from hpctestlib_ml.registry.megatron import models
from hpctestlib_ml.workloads.megatron import program

YAML = DATA / 'caraml' / 'llm_benchmark_nvidia_amd.yaml'


def tag_holds(expression, tags):
    '''JUBE's tag expression (``!`` not, ``+`` and, ``|`` or, brackets).'''
    if expression is None:
        return True
    python = re.sub(r'[A-Za-z0-9_]+',
                    lambda m: str(m.group(0) in tags), expression)
    python = (python.replace('!', ' not ').replace('+', ' and ')
              .replace('|', ' or '))
    return eval(python)


def jube_parameters(tags):
    '''{name: (mode, raw value)} of the parameters whose tags hold.'''
    document = yaml.safe_load(YAML.read_text())
    chosen = {}
    for parameterset in document['parameterset']:
        for p in parameterset['parameter']:
            if tag_holds(p.get('tag'), tags):
                chosen[p['name']] = (p.get('mode', 'text'), str(p['_']))
    return chosen


def expander(parameters):
    def value(name):
        mode, raw = parameters[name]
        text = substitute(raw)
        if mode == 'python':
            return str(eval(text))
        return text

    def substitute(text):
        # $$ is the shell's $; $name and ${name} are JUBE's, unknown ones
        # (shell variables) stay as they are.
        def one(match):
            name = match.group(1) or match.group(2)
            return value(name) if name in parameters else match.group(0)
        parts = text.split('$$')
        parts = [re.sub(r'\$\{(\w+)\}|\$(\w+)', one, p) for p in parts]
        return '$'.join(parts)
    return value, substitute


def caraml_command(size, system='A100'):
    '''The argument list CARAML runs pretrain_gpt.py with for *size*.'''
    parameters = jube_parameters({size, system})
    value, substitute = expander(parameters)
    preprocess = parameters['preprocess'][1]
    cmd = re.search(r'export CMD=" \\\n(.*?)"\n', preprocess, re.S).group(1)
    words = substitute(cmd).replace('\\\n', ' ').split()
    assert words[0].endswith('pretrain_gpt.py')
    environment = dict(re.findall(r'export (CUDA_DEVICE_MAX_CONNECTIONS)='
                                  r'(\S+)', preprocess))
    return words[1:], environment, value


def as_options(words):
    '''{option: [values]} of an argument list (an option's values are the
    words up to the next option); numbers written as CARAML writes them
    and as the suite does compare equal.'''
    options, current = {}, None
    for word in words:
        if word.startswith('--'):
            current = word
            options.setdefault(current, [])
        else:
            options[current].append(word.replace('_', ''))
    return {name: tuple(float(v) if re.fullmatch(r'[\d.e+-]+', v) else v
                        for v in values)
            for name, values in options.items()}


@pytest.mark.parametrize('size', ['800M', '13B', '175B'])
def test_suite_runs_carmls_arguments(size):
    theirs, environment, value = caraml_command(size)
    shape = models.MODELS[size]
    tp, pp = int(value('tp_size')), int(value('pp_size'))
    dp = int(value('dp_size'))
    micro = int(value('micro_batch_size'))
    assert (tp, pp, micro) == (shape['tp'], shape['pp'], shape['micro_batch'])
    global_batch = caraml.global_batch(size, micro, dp)
    assert global_batch == int(value('global_batch_size'))
    data = {'data_path': '$LLM_DATA_PATH', 'vocab_file': '$VOCAB_FILE',
            'merge_file': '$MERGE_FILE'}
    ours = program.pretrain_arguments(
        shape, tp, pp, micro, global_batch, 20, caraml.PRECISION[size], data)

    theirs, ours = as_options(theirs), as_options(ours)
    differ = {name for name in set(theirs) | set(ours)
              if theirs.get(name) != ours.get(name)}
    assert differ == set(caraml.DEPARTURES), (
        {n: (theirs.get(n), ours.get(n)) for n in differ})
    assert ours['--train-samples'] == (20.0 * global_batch,)
    assert environment == caraml.ENVIRONMENT


def test_the_expansion_reads_carmls_values():
    '''The expander itself, on values read by eye in the YAML: 13B on 44
    A100 nodes of 4 GPUs trains data parallel 44 x micro batch 2 x 64.'''
    theirs, _, value = caraml_command('13B')
    assert value('nodes') == '44' and value('gpus_per_node') == '4'
    assert value('global_batch_size') == str(44 * 2 * 64)
    options = as_options(theirs)
    assert options['--ffn-hidden-size'] == (20480.0,)
    assert '--fp16' in options and '--use-flash-attn' in options
    assert options['--lr-decay-samples'] == (128953125.0,)
