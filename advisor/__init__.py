"""advisor: a rule-based expert system that diagnoses AI training and inference profiles.

Python API (docs/python-api.md)::

    import advisor
    report = advisor.diagnose("./prof", env={"TASK_QUEUE_ENABLE": "2"}, context={"micro_batch_size": 4})
    for finding in report.findings:
        print(finding.severity, finding.title, finding.estimated_gain_us)
    report.findings_df()                      # pandas DataFrames: also facts_df(family), steps_df(), operators_df()
    print(advisor.render(report, "markdown"))  # or "terminal", "html", "json"
    report                                    # in Jupyter: the HTML report
    gap = advisor.compare("./gpu_traces", "./prof")   # side by side, and the diagnosis of the difference
    advisor.diagnose("./prof", options=advisor.RunOptions(jobs=4, max_file_bytes=16 << 30))   # the run's settings

The names below are imported when first used (PEP 562), so ``import advisor`` — and the command line's
``--version``, ``--help`` and ``rules`` commands — do not load pandas, pyarrow or matplotlib.
"""

from advisor.errors import quiet_interrupt_while_starting as _quiet_interrupt_while_starting

_quiet_interrupt_while_starting()  # before anything that takes a while to import (see cli.main)

import sys as _sys  # noqa: E402
import types as _types  # noqa: E402
from importlib import import_module as _import_module  # noqa: E402
from typing import TYPE_CHECKING  # noqa: E402

from advisor.errors import AdvisorError, InputError  # noqa: E402

if TYPE_CHECKING:
    from advisor.api import ComparisonReport, compare, render
    from advisor.diagnose import diagnose
    from advisor.report import Report
    from advisor.runoptions import RunOptions
    from advisor.usercontext import UserContext, build_context, context_from_dicts

# public name -> the module that defines it
_LAZY = {
    "ComparisonReport": "advisor.api",
    "compare": "advisor.api",
    "render": "advisor.api",
    "diagnose": "advisor.diagnose",
    "Report": "advisor.report",
    "RunOptions": "advisor.runoptions",
    "UserContext": "advisor.usercontext",
    "build_context": "advisor.usercontext",
    "context_from_dicts": "advisor.usercontext",
}
# Functions that share their name with a submodule (advisor/diagnose.py, advisor/compare.py, advisor/render/):
# ``advisor.diagnose`` is the function, whichever of the two was imported first.
_SHADOWED = frozenset({"compare", "diagnose", "render"})

__all__ = [
    "AdvisorError",
    "ComparisonReport",
    "InputError",
    "Report",
    "RunOptions",
    "UserContext",
    "__version__",
    "build_context",
    "compare",
    "context_from_dicts",
    "diagnose",
    "render",
]


def __getattr__(name: str) -> object:
    if name == "__version__":
        from advisor.version import VERSION

        value: object = VERSION
    elif name in _LAZY:
        value = getattr(_import_module(_LAZY[name]), name)
    else:
        raise AttributeError(f"module 'advisor' has no attribute {name!r}")
    globals()[name] = value  # found once; later look-ups do not come here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


class _Package(_types.ModuleType):
    """The package, whose functions named like a submodule are not replaced by that submodule when it is imported.

    Importing ``advisor.diagnose`` (the module) makes the import system set the package's ``diagnose``
    attribute to it; the function of that name must stay what ``advisor.diagnose`` means.
    """

    def __setattr__(self, name: str, value: object) -> None:
        if name in _SHADOWED and isinstance(value, _types.ModuleType):
            return
        super().__setattr__(name, value)


_sys.modules[__name__].__class__ = _Package
