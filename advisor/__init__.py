"""advisor: a rule-based expert system that diagnoses AI training and inference profiles.

Python API::

    import advisor
    report = advisor.diagnose("./prof", lang="en")
    for finding in report.findings:
        print(finding.severity, finding.title, finding.estimated_gain_us)
    gap = advisor.compare("./gpu_traces", "./prof")   # side by side, and the diagnosis of the difference
"""

from advisor.compare import compare
from advisor.diagnose import diagnose
from advisor.report import Report
from advisor.version import VERSION as __version__

__all__ = ["Report", "__version__", "compare", "diagnose"]
