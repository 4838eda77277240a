"""The file to give ``spark-submit``, which runs a Python file, not a command:

    spark-submit --master spark://HOST:7077 [--conf ...] \\
        "$(python -c 'import metaquorum.submit_audit as m; print(m.__file__)')" \\
        --input /shared/log --output /shared/log-audit [--report report.html]

runs ``metaquorum audit`` with those arguments on the master spark-submit was
given (docs/pipeline.md).
"""

import os
import sys

if __name__ == "__main__":
    # Run as a file, its folder comes first on sys.path: its modules would
    # shadow top-level ones of the same name (export, sim, ...).
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    from metaquorum.cli import main

    sys.exit(main(["audit", *sys.argv[1:]]))
