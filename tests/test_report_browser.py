"""The HTML report in a real browser (Debian's headless chromium): every
figure decodes, the page logs no error, what changed comes first, and a
screenshot is kept under the test's temporary directory."""
import json
import os
import re
import shutil
import subprocess

import pytest

from conftest import BIN
from perflog_history import generate

CHROMIUM = shutil.which('chromium') or shutil.which('chromium-browser')

#: Put first in <head> of a copy of the page: records errors and console
#: errors from everything after it, then at load checks every figure.
CHECKER = '''<script>
window.hpcmlErrors = [];
window.addEventListener('error', e => hpcmlErrors.push(String(e.message)));
const consoleError = console.error;
console.error = (...a) => { hpcmlErrors.push(a.join(' '));
                            consoleError(...a); };
window.addEventListener('load', () => {
  const images = [...document.images].map(i => ({
    alt: i.alt, complete: i.complete, width: i.naturalWidth,
    height: i.naturalHeight}));
  const out = document.createElement('pre');
  out.id = 'hpcml-check';
  out.textContent = JSON.stringify({images, errors: hpcmlErrors,
    headings: [...document.querySelectorAll('h2')].map(h => h.textContent)});
  document.body.appendChild(out);
});
</script>'''


def chromium(*args):
    if not CHROMIUM:
        message = ('chromium is not installed (apt-get install chromium; '
                   '.ci/run installs it)')
        if os.environ.get('CI'):
            pytest.fail(message)
        pytest.skip(message)
    return subprocess.run(
        [CHROMIUM, '--headless', '--no-sandbox', '--disable-gpu',
         '--hide-scrollbars', '--virtual-time-budget=10000', *args],
        capture_output=True, text=True, timeout=120)


@pytest.fixture(scope='module')
def html_report(tmp_path_factory):
    root = tmp_path_factory.mktemp('browser')
    generate(root / 'perflogs', days=30, slowdown=('BERTLarge', 4, 0.8))
    out = root / 'report'
    proc = subprocess.run([BIN / 'hpcml', 'report', '--perflogs',
                           root / 'perflogs', '--out', out],
                          capture_output=True, text=True, timeout=300)
    # 1: the generated history's latest runs include failures.
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    return out / 'report.html'


def test_every_figure_decodes_and_no_console_error(html_report):
    page = html_report.read_text()
    checked = html_report.with_name('checked.html')
    checked.write_text(page.replace('<head>', '<head>' + CHECKER, 1))
    proc = chromium('--dump-dom', checked.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = re.search(r'<pre id="hpcml-check">(.*?)</pre>', proc.stdout,
                      re.S)
    assert found, proc.stdout[-2000:]
    result = json.loads(found.group(1).replace('&quot;', '"')
                        .replace('&amp;', '&'))
    figures = page.count('<img ')
    assert figures >= 4 and len(result['images']) == figures
    for image in result['images']:
        assert image['complete'] and image['width'] > 100 and \
            image['height'] > 100, image
    assert result['errors'] == []
    assert result['headings'][0] == 'What changed'


def test_screenshot_shows_the_page(html_report):
    shot = html_report.with_name('screenshot.png')
    proc = chromium(f'--screenshot={shot}', '--window-size=1400,2400',
                    html_report.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b'\x89PNG\r\n\x1a\n' and len(data) > 50_000
    print(f'screenshot: {shot}')
