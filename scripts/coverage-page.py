#!/usr/bin/env python3
"""coverage-page.py — writes scripts/coverage-table.py's table of a coverage
database into docs/coverage.md, between the page's markers (the CPU test
coverage_table checks that the two agree).

usage: scripts/coverage-page.py COVERAGE_DB [PAGE]   (default docs/coverage.md)
Exit status: the table script's (0 no cell failed, 1 a cell failed: the page
shows it), or 2 on bad input (bad usage, an unreadable database or page, a
page without markers, a table cut short); the page is left alone on 2.
"""
import os
import pathlib
import re
import subprocess
import sys
import tempfile

START = "<!-- coverage table: scripts/coverage-table.py writes it -->\n"
END = "<!-- end of the coverage table -->"
# the table's last line (then, maybe, the failures outside its columns)
SUMMARY = re.compile(r"^\d+ runs \(commit .*; configurations: ", re.M)


def main(argv):
    usage = __doc__.strip().splitlines()[-4]
    if len(argv) == 2 and argv[1] in ("-h", "--help"):
        print(usage)
        return 0
    if len(argv) not in (2, 3):
        print(usage, file=sys.stderr)
        return 2
    here = pathlib.Path(__file__).resolve().parent
    page = pathlib.Path(argv[2] if len(argv) == 3 else here.parent / "docs" / "coverage.md")
    # the table is UTF-8 (×, ·) whatever the locale
    env = dict(os.environ, PYTHONIOENCODING="utf-8")
    table = subprocess.run([sys.executable, str(here / "coverage-table.py"), argv[1]],
                           capture_output=True, text=True, encoding="utf-8", env=env,
                           check=False)
    sys.stderr.write(table.stderr)
    if table.returncode not in (0, 1):
        return 2
    # a crash of the table script also exits 1: a table without its last line is not written
    if not SUMMARY.search(table.stdout):
        print("coverage-page.py: coverage-table.py printed no whole table; the page is left "
              "alone", file=sys.stderr)
        return 2
    if page.is_symlink() or not page.is_file():
        print(f"coverage-page.py: {page}: not a regular file; the page is left alone",
              file=sys.stderr)
        return 2
    try:
        text = page.read_text(encoding="utf-8")
    except (OSError, UnicodeError) as e:
        print(f"coverage-page.py: {page}: {e}", file=sys.stderr)
        return 2
    if START not in text or END not in text.split(START, 1)[1]:
        print(f"coverage-page.py: {page} has no table markers", file=sys.stderr)
        return 2
    head, rest = text.split(START, 1)
    tail = rest[rest.index(END):]
    new = head + START + table.stdout + tail
    if new != text:
        # written beside the page and renamed over it: a cut write never leaves half a page
        fd, tmp = tempfile.mkstemp(dir=page.parent, prefix=f".{page.name}.")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(new)
            os.chmod(tmp, page.stat().st_mode & 0o7777)
            os.replace(tmp, page)
        except OSError as e:
            os.unlink(tmp)
            print(f"coverage-page.py: {page}: {e}", file=sys.stderr)
            return 2
    return table.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv))
