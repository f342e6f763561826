"""A pause after the first performance record the time-series database
took, for a test to act at that point and at no other: with this
directory on ``PYTHONPATH`` and ``TEST_PUSH_PAUSE_DIR`` naming a
directory, the first process whose :class:`hpctestlib_ml.tsdb.push.Sender`
has a post taken creates ``pushed`` there and waits (at most
:data:`LIMIT` seconds) for the test to create ``go_on``; then the session
goes on. Everything else is the suite's own code: the post, the record's
lines, the outbox. Without the variable this file does nothing, and
nothing is imported before the suite itself imports ``push``."""
import importlib.util
import os
import sys
import time

DIRECTORY = os.environ.get('TEST_PUSH_PAUSE_DIR')
MODULE = 'hpctestlib_ml.tsdb.push'
#: Seconds the session waits for the test at most.
LIMIT = 600


def _pause():
    try:
        os.close(os.open(os.path.join(DIRECTORY, 'pushed'),
                         os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:     # another process paused already
        return
    go_on = os.path.join(DIRECTORY, 'go_on')
    deadline = time.monotonic() + LIMIT
    while not os.path.exists(go_on):
        if time.monotonic() > deadline:
            print(f'pause_after_push: no {go_on} after {LIMIT} s; going on',
                  file=sys.stderr)
            return
        time.sleep(0.05)


def _patch(push):
    send = push.Sender._send

    def _send(self, fp):
        before = self.sent
        send(self, fp)
        if self.sent > before:
            _pause()

    push.Sender._send = _send


class _AfterImport:
    '''Patches :data:`MODULE` once the suite imports it.'''

    def find_spec(self, name, path=None, target=None):
        if name != MODULE:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        execute = spec.loader.exec_module

        def exec_module(module):
            execute(module)
            _patch(module)

        spec.loader.exec_module = exec_module
        return spec


if DIRECTORY:
    sys.meta_path.insert(0, _AfterImport())
