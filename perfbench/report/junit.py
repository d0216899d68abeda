"""JUnit XML for CI systems that read test reports (GitLab, Jenkins, Azure, CircleCI).

Pure. One test case per gated comparison row and per threshold; a regression or a breach is a
``<failure>``, an inconclusive row a ``<skipped>`` with the reason, so dashboards show why.
"""

from __future__ import annotations

from collections.abc import Sequence
from xml.etree import ElementTree as ET

from perfbench.report.format import TITLES, change, spread
from perfbench.stats.compare import Comparison
from perfbench.stats.thresholds import ThresholdResult


def junit(result: Comparison | None, thresholds: Sequence[ThresholdResult]) -> str:
    suite = ET.Element("testsuite", name="perfbench")
    failures = skipped = tests = 0
    for row in result.rows if result is not None else ():
        if not row.gated or row.verdict == "n/a":
            continue
        tests += 1
        scope = row.scope if not row.key else f"{row.scope} {row.key}"
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"perfbench.stats.compare.{row.scope}",
            name=f"{scope}: {TITLES.get(row.metric, row.metric)}",
        )
        text = (
            f"baseline {spread(row.baseline, row.unit)}, candidate "
            f"{spread(row.candidate, row.unit)}, change {change(row)}, p {row.p}"
        )
        if row.verdict == "regression":
            failures += 1
            ET.SubElement(case, "failure", message=f"regression: {text}", type="regression")
        elif row.verdict == "inconclusive":
            skipped += 1
            ET.SubElement(case, "skipped", message=f"inconclusive (needs more runs): {text}")
        elif row.underpowered:
            skipped += 1
            ET.SubElement(case, "skipped", message=f"underpowered (could not fail): {text}")
    for t in thresholds:
        tests += 1
        case = ET.SubElement(
            suite, "testcase", classname="perfbench.threshold", name=t.threshold.text
        )
        if not t.ok:
            failures += 1
            ET.SubElement(case, "failure", message=f"breached: value {t.value}", type="threshold")
    suite.set("tests", str(tests))
    suite.set("failures", str(failures))
    suite.set("skipped", str(skipped))
    suite.set("errors", "0")
    ET.indent(suite)
    return (
        '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"
    )
