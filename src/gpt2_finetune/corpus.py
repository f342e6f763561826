"""A small English-like corpus the suite generates, for runs without a hub.

Deterministic (seeded): the same text on every machine, so losses and
perplexities compare across runs. Sentences are drawn from a fixed
vocabulary with simple grammar, enough for a byte-level BPE to learn merges
and for a tiny GPT-2 to lower its loss in a few steps.
"""
import random

_SUBJECTS = ('the cluster', 'a node', 'the scheduler', 'every rank',
             'the model', 'our benchmark', 'the network', 'a researcher',
             'the compiler', 'this partition', 'the file system', 'the job')
_VERBS = ('runs', 'measures', 'reports', 'trains', 'waits for', 'reads',
          'writes', 'compares', 'schedules', 'checks', 'loads', 'sends')
_OBJECTS = ('the training data', 'a new checkpoint', 'its throughput',
            'the loss curve', 'many small files', 'the reference value',
            'a batch of tokens', 'the results database', 'eight GPUs',
            'the performance log', 'a tiny model', 'the next iteration')
_TAILS = ('every night', 'after the update', 'on two nodes', 'in parallel',
          'without errors', 'as expected', 'once more', 'before noon',
          'with care', 'for the report')


def sentences(count, seed):
    rng = random.Random(seed)
    for _ in range(count):
        sentence = (f'{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} '
                    f'{rng.choice(_OBJECTS)} {rng.choice(_TAILS)}')
        yield sentence[0].upper() + sentence[1:] + '.'


def write(directory, train_lines=3000, validation_lines=300):
    '''Write train.txt and validation.txt (WikiText-like paragraphs) under
    *directory*; their paths.'''
    directory.mkdir(parents=True, exist_ok=True)
    paths = {}
    for split, lines, seed in (('train', train_lines, 1),
                               ('validation', validation_lines, 2)):
        text, paragraph = [], []
        for sentence in sentences(lines, seed):
            paragraph.append(sentence)
            if len(paragraph) == 5:
                text.append(' '.join(paragraph))
                paragraph = []
        path = directory / f'{split}.txt'
        path.write_text('\n'.join(text) + '\n')
        paths[split] = str(path)
    return paths
