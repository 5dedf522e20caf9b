"""Run the advisor command line in this process and write its own peak RSS (KiB, workers left out) to a file.

    python bench/peak.py PEAK_FILE diagnose PATH -f json -o report.json

getrusage(RUSAGE_SELF) counts this process only; GNU time reports the largest process of the tree, which is a
worker when the ranks are read in forked workers.
"""

import atexit
import resource
import sys

if __name__ == "__main__":
    target = sys.argv[1]
    sys.argv = ["advisor", *sys.argv[2:]]

    def write_peak() -> None:
        with open(target, "w") as handle:
            handle.write(str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))

    atexit.register(write_peak)
    from advisor.cli import main

    main()
