#!/usr/bin/env python3
"""check_junit.py: reads a JUnit XML file with junitparser (Debian's
python3-junitparser), as a CI system would, and checks what
tests/cpu/test_compare_junit.c expects of `tpbench compare --format junit`.

Usage: check_junit.py FILE TESTS FAILURES SKIPPED [NAME-SUBSTRING CLASSNAME]
Exit 0 when every check holds, 1 (with the reasons) when one does not, 77
(ctest's skip code) when junitparser is missing.
"""
import sys

try:
    from junitparser import JUnitXml, Failure, Skipped, TestSuite
except ImportError:
    print("skipped: python3-junitparser is missing (bash scripts/setup.sh)")
    sys.exit(77)


def main(argv):
    path, tests, failures, skipped = argv[1], int(argv[2]), int(argv[3]), int(argv[4])
    want_name = argv[5] if len(argv) > 5 else None
    want_class = argv[6] if len(argv) > 6 else None
    problems = []
    xml = JUnitXml.fromfile(path)
    suites = [xml] if isinstance(xml, TestSuite) else list(xml)
    if len(suites) != 1:
        problems.append(f"{len(suites)} test suites, expected 1")
    suite = suites[0]
    cases = list(suite)
    n_fail = sum(1 for c in cases for r in c.result if isinstance(r, Failure))
    n_skip = sum(1 for c in cases for r in c.result if isinstance(r, Skipped))
    for what, got, want in (("test cases", len(cases), tests), ("failures", n_fail, failures),
                            ("skipped", n_skip, skipped), ("suite tests", suite.tests, tests),
                            ("suite failures", suite.failures, failures),
                            ("suite skipped", suite.skipped, skipped)):
        if got != want:
            problems.append(f"{what}: {got}, expected {want}")
    for case in cases:
        if not case.name or case.classname.count("/") < 2:
            problems.append(f"test case without a name or kind/model/op: {case.name!r}")
        if case.time is None or case.time < 0:
            problems.append(f"{case.name!r}: time {case.time!r}")
        for r in case.result:
            if not r.message:
                problems.append(f"{case.name!r}: a {type(r).__name__} without a message")
    props = {p.name: p.value for p in suite.properties()}
    for key in ("base.commit", "head.commit", "base.gpu", "head.gpu", "head.driver", "alpha"):
        if not props.get(key):
            problems.append(f"property {key} missing")
    if want_name:
        hits = [c for c in cases if want_name in c.name]
        if not hits:
            problems.append(f"no test case named with {want_name!r}")
        elif want_class and not any(c.classname == want_class for c in hits):
            problems.append(f"{want_name!r}: classnames {[c.classname for c in hits]!r}, "
                            f"expected {want_class!r}")
    for p in problems:
        print("check_junit:", p)
    print(f"check_junit: {path}: {len(cases)} test cases, {n_fail} failures, {n_skip} skipped, "
          f"{len(props)} properties{'' if problems else ': ok'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
