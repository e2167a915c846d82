#!/usr/bin/env python3
"""coverage-page.py — writes scripts/coverage-table.py's table of a coverage
database into docs/coverage.md, between the page's markers (the CPU test
coverage_table checks that the two agree).

usage: scripts/coverage-page.py COVERAGE_DB [PAGE]   (default docs/coverage.md)
Exit status: the table script's (0 no failed cell, 1 one failed, 2 bad input);
the page is left alone on 2.
"""
import pathlib
import subprocess
import sys

START = "<!-- coverage table: scripts/coverage-table.py writes it -->\n"
END = "<!-- end of the coverage table -->"


def main(argv):
    if len(argv) not in (2, 3):
        print(__doc__.strip().splitlines()[-3], file=sys.stderr)
        return 2
    here = pathlib.Path(__file__).resolve().parent
    page = pathlib.Path(argv[2] if len(argv) == 3 else here.parent / "docs" / "coverage.md")
    table = subprocess.run([sys.executable, str(here / "coverage-table.py"), argv[1]],
                           capture_output=True, text=True, check=False)
    sys.stderr.write(table.stderr)
    if table.returncode not in (0, 1):
        return 2
    text = page.read_text()
    if START not in text or END not in text:
        print(f"coverage-page.py: {page} has no table markers", file=sys.stderr)
        return 2
    head, rest = text.split(START, 1)
    tail = rest[rest.index(END):]
    page.write_text(head + START + table.stdout + tail)
    return table.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv))
