"""What ``hpcml prepare gpt2_finetune`` fetches: the ``gpt2`` model and
tokenizer and the ``wikitext-2-raw-v1`` dataset, the only workload data
fetched from a hub (:mod:`hpctestlib_ml.prepare`).

They are stored as plain directories (transformers' ``save_pretrained``,
datasets' ``save_to_disk``), which the program loads with
``from_pretrained(DIR)`` and ``load_from_disk(DIR)``: no hub, no cache
lookup that could reach for the network. Where no hub is reachable (CI, a
GPU machine without network), :func:`prepare_gpt2_stand_in` makes the same
directories from local sources.
"""
import pathlib

from hpctestlib_ml import program_tables
from hpctestlib_ml.prepare import PrepareError

#: What GPT-2 fine-tuning's benchmark reads (run_clm's model and data).
GPT2_MODEL = 'gpt2'
GPT2_DATASET = ('wikitext', 'wikitext-2-raw-v1')


def gpt2_paths(root, model=GPT2_MODEL, dataset=GPT2_DATASET[1]):
    '''(model directory, dataset directory) of GPT-2 fine-tuning under
    *root*.'''
    base = pathlib.Path(root) / 'gpt2_finetune'
    return base / 'models' / model, base / 'datasets' / dataset


def gpt2_missing(root, model=GPT2_MODEL):
    '''Why GPT-2 fine-tuning's model or data are not ready under *root*,
    naming the command that prepares them; None if they are.'''
    model_dir, data_dir = gpt2_paths(root, model)
    missing = [str(path) for path, marker in ((model_dir, 'config.json'),
                                              (data_dir, 'dataset_dict.json'))
               if not (path / marker).is_file()]
    if not missing:
        return None
    return (f'{model} and WikiText-2 are not prepared ({", ".join(missing)} '
            f'missing): run `hpcml prepare gpt2_finetune --dir {root}` once '
            f'on a machine with internet (e.g. a login node)')


def prepare_gpt2_finetune(root, model=GPT2_MODEL, source=None,
                          dataset=None):
    '''Fetch *model* (from *source*, default the hub's model of that name)
    and the dataset (*dataset*: ``(builder, kwargs)`` for
    ``datasets.load_dataset``, default WikiText-2 raw) into *root*; the
    directories written.'''
    import datasets
    from transformers import AutoModelForCausalLM, AutoTokenizer
    model_dir, data_dir = gpt2_paths(root, model)
    source = source or model
    builder, kwargs = dataset or (GPT2_DATASET[0],
                                  {'name': GPT2_DATASET[1]})
    try:
        AutoTokenizer.from_pretrained(source).save_pretrained(model_dir)
        AutoModelForCausalLM.from_pretrained(source).save_pretrained(
            model_dir)
        raw = datasets.load_dataset(builder, **kwargs)
    except OSError as err:
        raise PrepareError(f'cannot fetch {source} or the dataset: {err} '
                           f'(run this where the Hugging Face hub is '
                           f'reachable)') from None
    raw.save_to_disk(str(data_dir))
    return [model_dir, data_dir]


#: Blocks of 1024 tokens that run_clm makes of WikiText-2 raw with the
#: gpt2 tokenizer: ``train_samples = 2318`` in run_clm's train metrics
#: (public logs of ``run_clm.py --model_name_or_path gpt2 --dataset_name
#: wikitext --dataset_config_name wikitext-2-raw-v1``), 240 for validation.
WIKITEXT2_BLOCKS = {'train': 2318, 'validation': 240}


def prepare_gpt2_stand_in(root, blocks=None):
    '''Where no hub is reachable (this project's CI, a GPU machine without
    network): the directories ``hpcml prepare gpt2_finetune`` writes,
    made from local sources, under *root*/prepared: the published gpt2
    config (124M parameters, random weights, from transformers'
    defaults), the tiny run's byte-level BPE and generated corpus
    (``src/gpt2_finetune``), put through the same preparation. Returns
    *root*/prepared.

    *blocks* (``{split: blocks}``, e.g. :data:`WIKITEXT2_BLOCKS`): a
    generated corpus of about that many 1024-token blocks instead of the
    tiny run's 27, so that an epoch is as many steps as WikiText-2's. With
    27 blocks an epoch is 4 steps at batch 8, and Trainer's start of each
    epoch (its data-loader workers started again) was 54-61 % of the step
    time on an H200 (``bench/results/gpuval-h200-2026-11-26``).'''
    root = pathlib.Path(root)
    prepared = root / 'prepared'
    if gpt2_missing(prepared) is None:
        return prepared
    program_tables.importable()
    from gpt2_finetune.__main__ import model_config, tiny_model_and_data
    from transformers import GPT2LMHeadModel
    tokenizer, _, (_, data) = tiny_model_and_data(root / 'work')
    if blocks:
        data = sized_corpus(tokenizer, data['data_files'], blocks,
                            root / 'corpus')
    source = root / 'hub' / 'gpt2'
    tokenizer.save_pretrained(source)
    GPT2LMHeadModel(model_config('gpt2')).save_pretrained(source)
    prepare_gpt2_finetune(prepared, source=str(source),
                          dataset=('text', data))
    return prepared


def sized_corpus(tokenizer, files, blocks, directory, block_size=1024):
    '''The generated corpus written under *directory* with about
    *blocks* ``{split: count}`` blocks of *block_size* tokens of
    *tokenizer* per split (its tokens per line measured on *files*, the
    tiny corpus); ``load_dataset('text', ...)``'s keyword arguments.'''
    from gpt2_finetune import corpus
    lines = pathlib.Path(files['train']).read_text().splitlines()
    tokens = sum(len(tokenizer(line)['input_ids']) for line in lines)
    per_line = tokens / len(lines)
    # corpus.write counts sentences, five a line.
    sentences = {split: int(count * block_size / per_line * 5) + 5
                 for split, count in blocks.items()}
    paths = corpus.write(directory, train_lines=sentences['train'],
                         validation_lines=sentences['validation'])
    return {'data_files': paths}

