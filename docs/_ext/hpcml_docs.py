"""The documentation's generated parts, from the suite's own declarations.

A Sphinx extension of directives, each writing reStructuredText from
one home of its facts, so that no page copies them by hand:

- ``hpcml-settings KIND``: the table of every setting of one kind
  (``variable``, ``environment``, ``extras``, ``internal``) from
  :func:`hpctestlib_ml.settings.rows`;
- ``hpcml-gpu-models``: the table of GPU model keys (a partition's
  ``devices`` model, ``HPCML_GPU_MODEL``) from
  :mod:`hpctestlib_ml.constants`: peaks, memory, vendor, the product
  names that map to each, what to know of it;
- ``hpcml-workloads``: one row per workload of the registry
  (:func:`hpctestlib_ml.registry.registered`);
- ``hpcml-published``: one row per parameter count a workload's
  declaration publishes (``Workload.published``), with its source;
- ``hpcml-workload-pages KIND``: the toctree of the registered workloads
  of KIND (``workload``, ``component``), so that a new workload's page
  needs no list edited;
- ``hpcml-workload NAME``: what the registry declares for NAME, its sizes,
  its test class with its variables and Summary (autodoc) and its
  references file.

Each generated page records the files it is made from, so that ``make
docs`` rebuilds it when one changes (Sphinx rebuilds a page only when its
source or a noted dependency is newer): the CLI page (sphinx-argparse's
``argparse`` directive, wrapped) every module of the library, whose help
texts and defaults the parser reads; the settings, workload and
fidelity pages the settings' and registry's modules (and ``model_info``,
where the type of a published count is).

At the start of a build, a registered workload without its page
(``docs/workloads/<name>.md`` or ``.rst``) is a warning, so that
``sphinx-build -W`` fails until it has one.

The functions that write the text take no Sphinx object and are tested
without a build (``tests/test_docs.py``).
"""
import importlib
import pathlib

REPO = pathlib.Path(__file__).resolve().parents[2]

#: The kinds of setting (:data:`hpctestlib_ml.settings.KINDS`), each
#: with the heading of its table's first column.
SETTING_KINDS = {'variable': 'variable', 'environment': 'variable',
                 'extras': 'key', 'internal': 'variable'}


#: Characters that start or end RST inline markup.
_MARKUP = '\\*_`|[]'


def plain(text):
    '''*text* (a declaration's words, not RST) as RST that shows it as
    it is: its markup characters escaped.'''
    return ''.join('\\' + c if c in _MARKUP else c for c in str(text))


def _cell(text):
    '''*text* (RST) as one cell of a list-table: one line, never
    empty.'''
    text = ' '.join(str(text).split())
    return text if text else '\\-'


def _literal(value):
    '''*value* as inline literal text, ``-`` for None.'''
    if value is None or value == '':
        return '\\-'
    return '``' + str(value).replace('``', "'") + '``'


def list_table(title, header, rows, widths=None):
    '''A list-table of *rows* (lists of cells in RST) under *header*
    (None: no header row), as lines.'''
    lines = [f'.. list-table:: {title}'.rstrip(),
             f'   :header-rows: {0 if header is None else 1}']
    if widths:
        lines.append('   :widths: ' + ' '.join(map(str, widths)))
    lines.append('')
    for row in ([] if header is None else [header]) + list(rows):
        lines.append(f'   * - {_cell(row[0])}')
        lines += [f'     - {_cell(cell)}' for cell in row[1:]]
    return lines + ['']


def settings_rst(kind, rows=None):
    '''The table of every setting of *kind*, as lines of RST; *rows* are
    :func:`hpctestlib_ml.registry.setting_rows`'s, the workloads' own
    included (read when None).'''
    if kind not in SETTING_KINDS:
        raise ValueError(f'unknown kind of setting {kind!r}: use one of '
                         f'{", ".join(SETTING_KINDS)}')
    if rows is None:
        from hpctestlib_ml import registry
        rows = registry.setting_rows()
    first = SETTING_KINDS[kind]
    table = [[_literal(name), stype, _literal(default), plain(allowed),
              plain(reader), plain(doc)]
             for skind, name, stype, default, allowed, reader, doc in rows
             if skind == kind]
    if not table:
        raise ValueError(f'no setting of kind {kind!r} is declared')
    return list_table('', [first, 'type', 'default', 'allowed',
                              'read by', 'what it is'], table,
                      widths=[14, 7, 10, 20, 12, 37])


def _tflops(rates, key):
    rate = rates.get(key)
    return '\\-' if rate is None else f'{rate / 1e12:g}'


def gpu_models_rst():
    '''The table of GPU model keys, as lines of RST: each key of
    :data:`~hpctestlib_ml.constants.DEVICE_PEAK_FLOPS` with its vendor,
    memory (one size, or the sizes a partition must choose from with
    ``device_memory_gib``), dense peaks, the product names
    (``nvidia-smi``, ``rocm-smi``) that map to it, and its note.'''
    from hpctestlib_ml import constants as c
    rows = []
    for key, rates in c.DEVICE_PEAK_FLOPS.items():
        if key in c.DEVICE_MEMORY_GIB:
            memory = f'{c.DEVICE_MEMORY_GIB[key]}'
        else:
            sizes = ' or '.join(map(str, c.DEVICE_MEMORY_SIZES[key]))
            memory = f'{sizes}: set ``device_memory_gib``'
        names = ', '.join(f'``{pattern}``' for pattern, k in
                          c.GPU_PRODUCT_NAMES if k == key)
        rows.append([f'``{key}``', c.GPU_VENDORS[key], memory,
                     _tflops(rates, 'fp32'), _tflops(rates, 'tf32'),
                     _tflops(rates, 'bf16'), _tflops(rates, 'fp16'),
                     names or '\\-', plain(c.GPU_MODEL_NOTES.get(key, ''))])
    return list_table('GPU model keys', [
        'key', 'vendor', 'memory (GB)', 'fp32', 'tf32', 'bf16', 'fp16',
        'product names containing', 'note'], rows,
        widths=[12, 7, 14, 7, 7, 7, 7, 15, 24])


def _workloads():
    from hpctestlib_ml import registry
    return registry.registered()


def test_class(workload):
    '''The ReFrame test class of *workload* (a declaration):
    ``<check>Training`` of :mod:`hpctestlib_ml.workloads.<name>`, or a
    component's ``<check>Benchmark``.'''
    module = importlib.import_module(f'hpctestlib_ml.workloads.'
                                     f'{workload.name}')
    suffix = 'Training' if workload.trains else 'Benchmark'
    return getattr(module, f'{workload.check}{suffix}')


def declaration_file(workload):
    '''The file of *workload*'s declaration, relative to the repository
    (a module, or a package's ``__init__.py``).'''
    module = importlib.import_module(f'hpctestlib_ml.registry.'
                                     f'{workload.name}')
    return pathlib.Path(module.__file__).relative_to(REPO)


def library_files(*parts):
    '''Every Python file under ``hpctestlib_ml/<parts>``: what a generated
    page depends on.'''
    return sorted(str(p) for p in REPO.joinpath('hpctestlib_ml', *parts)
                  .rglob('*.py'))


def page_of(name):
    '''The document name of workload *name*'s page.'''
    return f'workloads/{name}'


def workloads_rst(registered=None):
    '''One row per registered workload, as lines of RST.'''
    registered = _workloads() if registered is None else registered
    rows = []
    for name, w in registered.items():
        rows.append([f':doc:`{name} </{page_of(name)}>`', w.kind,
                     f'``{w.check}``', f'``src/{w.program}``',
                     f'``{w.parser.__name__.rsplit(".", 1)[-1]}``',
                     f'``{w.headline.metric}``'])
    return list_table('The workloads of the registry',
                      ['workload', 'kind', 'check', 'program', 'parser',
                       'headline'], rows)


def _source(source):
    '''A published count's *source* as RST: a link where it is a URL
    (shown without its scheme), else the citation as written.'''
    if source.startswith(('https://', 'http://')):
        return f'`{source.split("://", 1)[1]} <{source}>`__'
    return plain(source)


def _published_flops(count):
    '''The forward FLOPs a source publishes for one sample, as it counts
    them.'''
    if count.flops is None:
        return '\\-'
    once = (', a multiply-add counted once'
            if count.flops_per_multiply_add == 1 else '')
    return f'{count.flops / 1e9:g} G{once}'


def published_rst(registered=None):
    '''One row per parameter count a registered workload's declaration
    publishes (``Workload.published``): its workload and size, the count,
    whose it is, its source, whether the program builds that model, and
    the forward FLOPs published with it; as lines of RST.'''
    registered = _workloads() if registered is None else registered
    rows = [[f':doc:`{name} </{page_of(name)}>`', _literal(size),
             f'{count.params:,}', plain(count.whose), _source(count.source),
             'yes' if count.built else 'no: set beside it',
             _published_flops(count)]
            for name, w in registered.items()
            for size, counts in w.published.items() for count in counts]
    if not rows:
        raise ValueError('no workload of the registry publishes a count')
    return list_table('Published parameter counts', [
        'workload', 'size', 'parameters', 'whose, and what it counts',
        'source', 'the program builds it', 'forward FLOPs published'],
        rows, widths=[12, 9, 12, 30, 19, 9, 9])


def _sizes(workload):
    '''The size table of *workload*: ``short`` derived as the checks
    derive it (:func:`hpctestlib_ml.sizes.size_table`).'''
    from hpctestlib_ml import sizes
    own = getattr(workload, 'sizes', None)
    if own is None:
        own = getattr(workload.test_class(), 'sizes', {})
    return sizes.size_table(own)


def _precisions(workload):
    if workload.precisions is None:
        return 'none (it takes no precision)'
    if isinstance(workload.precisions, dict):
        return '; '.join(f'{kind}: ' + ', '.join(map(_literal, names))
                         for kind, names in workload.precisions.items())
    return ', '.join(map(_literal, workload.precisions))


def workload_rst(name, registered=None):
    '''What the registry declares for workload *name*, its sizes, its
    test class and its references file, as lines of RST.'''
    registered = _workloads() if registered is None else registered
    if name not in registered:
        raise ValueError(f'unknown workload {name!r}: use one of '
                         f'{", ".join(registered)}')
    w = registered[name]
    cls = test_class(w)
    better = 'higher' if w.headline.higher_is_better else 'lower'
    facts = [
        ['workload (perflogs, references, ``hpcml extract``)',
         _literal(w.name)],
        ['kind', w.kind + (f' (measures the {w.explains})'
                           if w.explains else '')],
        ['check (``checks/{}.py``)'.format(w.name),
         f'``{w.check}`` and ``{w.check}Container``'],
        ['test class', f':class:`{cls.__module__}.{cls.__name__}`'],
        ['program', f'``python -m {w.program}`` (``src/{w.program}``)'],
        ['log parser', f':mod:`{w.parser.__name__}`'],
        ['headline (report score)',
         f'``{w.headline.metric}``, {better} is better, weight '
         f'{w.headline.weight:g}'],
        ['precisions (``-S precision=``)', _precisions(w)],
        ['data', plain(w.data) or '\\-'],
        ['packages beyond the framework',
         ', '.join(map(_literal, w.packages)) or '\\-'],
    ]
    if w.benchmark:
        facts.append(['MLPerf benchmark name', _literal(w.benchmark)])
    if w.names_note:
        facts.append(['names', plain(w.names_note)])
    lines = ['Registry', '--------', '',
             f'From the registry (``{declaration_file(w)}``, '
             '``WORKLOAD``).', '']
    lines += list_table('', None, facts, widths=[30, 70])

    table = _sizes(w)
    keys = sorted({k for settings in table.values() for k in settings})
    lines += ['Sizes', '-----', '',
              '``-S size=`` (or ``--mode``) picks a column; ``-S NAME=`` '
              'overrides one value. ``short`` is ``benchmark`` for a fixed '
              'number of steps (:data:`hpctestlib_ml.sizes.SHORT_SIZE`).',
              '']
    lines += list_table('Sizes', ['setting'] + list(table), [
        [f'``{k}``'] + [_literal(table[size].get(k)) for size in table]
        for k in keys])

    lines += ['Test class', '----------', '',
              f'.. autoclass:: {cls.__module__}.{cls.__name__}',
              '   :members:', '   :show-inheritance:', '']

    refs = REPO / 'config' / 'references' / f'{w.name}.yaml'
    if refs.exists():
        lines += ['References file', '---------------', '',
                  f'``config/references/{w.name}.yaml``, as the checks read '
                  'it (published figures, and the block ``hpcml references '
                  '--write`` generates):', '',
                  f'.. literalinclude:: /../config/references/{w.name}.yaml',
                  '   :language: yaml', '']
    return lines


def pages_of_kind(kind, registered=None):
    '''The pages (under ``workloads/``) of the registered workloads of
    *kind* (``workload`` or ``component``), for their table of contents.'''
    registered = _workloads() if registered is None else registered
    kinds = {w.kind for w in registered.values()}
    if kind not in kinds:
        raise ValueError(f'no workload of kind {kind!r}: use one of '
                         f'{", ".join(sorted(kinds))}')
    return [name for name, w in registered.items() if w.kind == kind]


def missing_pages(docs_dir, registered=None):
    '''The registered workloads without a page under *docs_dir*.'''
    registered = _workloads() if registered is None else registered
    docs_dir = pathlib.Path(docs_dir)
    return [name for name in registered
            if not any((docs_dir / f'{page_of(name)}{suffix}').exists()
                       for suffix in ('.md', '.rst'))]


def setup(app):
    from docutils.parsers.rst import Parser
    from docutils.utils import new_document
    from docutils.statemachine import StringList
    from sphinx.directives.other import TocTree
    from sphinx.util import logging
    from sphinx.util.docutils import SphinxDirective
    from sphinxarg.ext import ArgParseDirective

    logger = logging.getLogger(__name__)

    class Generated(SphinxDirective):
        '''A directive whose content is RST the suite's declarations
        write: parsed as RST whatever the page's own markup (MyST parses a
        directive's nested content as Markdown), its sections nested in
        the page's section where the directive stands.'''
        has_content = False

        def lines(self):
            raise NotImplementedError

        def run(self):
            doc = new_document(self.get_source_info()[0],
                               self.state.document.settings)
            doc.reporter = self.state.document.reporter
            Parser().parse('\n'.join(self.lines()), doc)
            return doc.children

    def note(env, files):
        for path in files:
            env.note_dependency(path)

    class Settings(Generated):
        required_arguments = 1

        def lines(self):
            note(self.env, [str(REPO / 'hpctestlib_ml/settings.py'),
                            *library_files('registry')])
            return settings_rst(self.arguments[0])

    class GpuModels(Generated):
        required_arguments = 0

        def lines(self):
            self.env.note_dependency(str(REPO / 'hpctestlib_ml/constants.py'))
            return gpu_models_rst()

    class Workloads(Generated):
        required_arguments = 0

        def lines(self):
            note(self.env, library_files('registry'))
            return workloads_rst()

    class Published(Generated):
        required_arguments = 0

        def lines(self):
            note(self.env, [str(REPO / 'hpctestlib_ml/model_info.py'),
                            *library_files('registry')])
            return published_rst()

    class OneWorkload(Generated):
        required_arguments = 1

        def lines(self):
            name = self.arguments[0]
            note(self.env, [str(REPO / declaration_file(_workloads()[name])),
                            *library_files('registry')])
            return workload_rst(name)

    class CommandLine(ArgParseDirective):
        '''sphinx-argparse's ``argparse``, rebuilt when any module of the
        library changes: the parser's help texts and defaults come from
        the commands' modules and what they import.'''

        def run(self):
            note(self.env, library_files())
            return super().run()

    class WorkloadPages(TocTree):
        '''A toctree of the registered workloads of one kind (its
        argument), so that a new workload's page needs no list edited.'''
        required_arguments = 1
        has_content = False

        def run(self):
            kind, self.arguments = self.arguments[0], []
            self.content = StringList(pages_of_kind(kind),
                                      source=self.get_source_info()[0])
            return super().run()

    def check_pages(app):
        for name in missing_pages(app.srcdir):
            logger.warning(f'workload {name!r} of the registry has no page: '
                           f'add docs/{page_of(name)}.md (docs/workloads/'
                           'index.md says what it holds)')

    app.add_directive('hpcml-settings', Settings)
    app.add_directive('hpcml-gpu-models', GpuModels)
    app.add_directive('hpcml-workloads', Workloads)
    app.add_directive('hpcml-workload', OneWorkload)
    app.add_directive('hpcml-published', Published)
    app.add_directive('hpcml-workload-pages', WorkloadPages)
    app.add_directive('argparse', CommandLine, override=True)
    app.connect('builder-inited', check_pages)
    return {'parallel_read_safe': True, 'parallel_write_safe': True}
