"""advisor: a rule-based expert system that diagnoses AI training and inference profiles.

Python API::

    import advisor
    report = advisor.diagnose("./prof", lang="en")
    for finding in report.findings:
        print(finding.severity, finding.title, finding.estimated_gain_us)
    gap = advisor.compare("./gpu_traces", "./prof")   # side by side, and the diagnosis of the difference
"""

from advisor.errors import quiet_interrupt_while_starting as _quiet_interrupt_while_starting

_quiet_interrupt_while_starting()  # before the imports that take a while (see cli.main)

from advisor.compare import compare  # noqa: E402
from advisor.diagnose import diagnose  # noqa: E402
from advisor.report import Report  # noqa: E402
from advisor.version import VERSION as __version__  # noqa: E402

__all__ = ["Report", "__version__", "compare", "diagnose"]
