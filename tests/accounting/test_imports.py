"""privaudit.accounting and the compute-epsilon command never import torch or opacus."""

import subprocess
import sys


def test_accounting_and_cli_do_not_load_torch():
    code = (
        "import sys\n"
        "import privaudit.accounting, privaudit.accounting.accountants, privaudit.accounting.calibrate\n"
        "import privaudit.accounting.closed_form, privaudit.accounting.query, privaudit.accounting.ledger\n"
        "import privaudit.cli.app\n"
        "from privaudit.cli.app import main\n"
        "main(['compute-epsilon', '--mechanism', 'subsampled-gaussian', '--noise-multiplier', '1', '--sample-rate', '0.01',"
        " '--steps', '100', '--delta', '1e-5', '--json', '--accountant', 'rdp'])\n"
        "bad = [m for m in ('torch', 'opacus', 'matplotlib') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
