"""What a log says beside its failure's line, added to the reason: the
collective a watchdog timed out, the GPU architecture a PyTorch build
lacks."""
import dataclasses
import re

from hpctestlib_ml.triage.lines import REASON_LIMIT, _trim


def with_detail(found, text):
    '''*found* (a :class:`Triage` of *text*) with what the log says
    beside its line: a collective timeout's collective and sequence number
    (:func:`collective_timeout`), the GPU architecture a PyTorch build has
    no kernels for (:func:`architecture_missing`).'''
    if found.category == 'communication':
        return collective_timeout(found, text)
    if found.category == 'software':
        return architecture_missing(found, text)
    return found


#: PyTorch's watchdog at a collective's timeout, the collective's name and
#: sequence number in its WorkNCCL: "[Rank 5] Watchdog caught collective
#: operation timeout: WorkNCCL(SeqNum=199, OpType=_REDUCE_SCATTER_BASE,
#: NumelIn=7098994688, NumelOut=443687168, Timeout(ms)=600000) ran for
#: 882737 milliseconds before timing out." (NVIDIA/Megatron-LM #935, in a
#: C++ exception's what() after "terminate called after throwing an
#: instance of 'c10::DistBackendError'"; huggingface/open-r1 #620, the
#: same cut across lines by the terminal).
_COLLECTIVE_TIMEOUT = re.compile(
    r'\[Rank (\d+)\] Watchdog caught collective operation timeout: '
    r'(?:WorkNCCL|WorkRCCL)\((?:[^()]|\([^()]*\))*\) ran for \d+ '
    r'milliseconds before timing out\.')


def collective_timeout(found, text):
    '''*found* with the collective that timed out where the log has
    PyTorch's watchdog line and *found*'s reason lacks its ``OpType``:
    its rank's (*found*'s rank), else the first; the rank it names where
    *found* names none.'''
    if 'Watchdog' not in text or 'OpType=' in found.reason:
        return found
    timeouts = list(_COLLECTIVE_TIMEOUT.finditer(text))
    if not timeouts:
        # A terminal or an issue's page that cut the line: read it whole.
        timeouts = list(_COLLECTIVE_TIMEOUT.finditer(text.replace('\n', '')))
    if not timeouts:
        return found
    own = [m for m in timeouts if m.group(1) == found.rank]
    match = (own or timeouts)[0]
    line = found.reason
    words = match.group(0)
    reason = (words if _CXX_TERMINATE.match(line) or
              len(line) + len(words) + 2 > REASON_LIMIT else
              f'{line}: {words}')
    return dataclasses.replace(found, reason=_trim(reason),
                               rank=found.rank or match.group(1))


#: A C++ exception's first line, which names only its type.
_CXX_TERMINATE = re.compile(r'terminate called after throwing')

#: PyTorch's warning where a build has no kernels for the GPU's
#: architecture: "NVIDIA GeForce RTX 3090 with CUDA capability sm_86 is not
#: compatible with the current PyTorch installation." then "The current
#: PyTorch install supports CUDA capabilities sm_37 sm_50 sm_60 sm_70."
#: (Turoad/CLRNet #83; Janrupf/stable-diffusion-webui-nix #9, sm_120).
_ARCH_WARNING = re.compile(
    r'(\S[^\n]*?) with CUDA capability (sm_\d+) is not compatible with the '
    r'current PyTorch installation')
_ARCH_SUPPORTED = re.compile(
    r'The current PyTorch install supports CUDA capabilities ((?:sm_\d+ ?)+)')
#: The error that follows it: "RuntimeError: CUDA error: no kernel image
#: is available for execution on the device".
_NO_KERNEL = re.compile(r'no kernel image is available')


def architecture_missing(found, text):
    '''*found* with the GPU architecture the PyTorch build lacks, where
    its reason is CUDA's "no kernel image is available" and the log has
    PyTorch's warning naming the architecture; else *found*.'''
    warning = _ARCH_WARNING.search(text)
    if not (warning and _NO_KERNEL.search(found.reason)):
        return found
    device = warning.group(1).split(': ')[-1].strip()
    supported = _ARCH_SUPPORTED.search(text)
    has = (f'; this PyTorch build has kernels for {supported.group(1).strip()}'
           if supported else '')
    return dataclasses.replace(found, reason=_trim(
        f'{found.reason} ({device} is {warning.group(2)}{has})'))
