"""advisor: a rule-based expert system that diagnoses AI training and inference profiles.

Python API::

    import advisor
    report = advisor.diagnose("./prof", lang="en")
    for finding in report.findings:
        print(finding.severity, finding.title, finding.estimated_gain_us)
"""

from advisor.diagnose import diagnose
from advisor.report import Report
from advisor.version import VERSION as __version__

__all__ = ["Report", "__version__", "diagnose"]
