"""docs/architecture.md's file table against the tree.

Every folder of troupe's sources (the libraries, the programs, the Python
module) has a row in the table of "Layout and layers", and that row names
each of the folder's source files, by its name ("float_wire.hpp") or its
stem ("float_wire"; a .cpp and its .hpp together, as "kernels.cu" names
kernels.hpp too). A name with an
extension that the page gives in backticks must be a file that exists, in
the row's folder or as a path from the repository's root: a file renamed
or removed fails the test until the page follows.
"""

import os
import re
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
PAGE = os.path.join(ROOT, "docs", "architecture.md")
SOURCE_ROOTS = ["runtime", "models", "gpu", "actors", "apps", "python"]
EXTENSIONS = (".cpp", ".hpp", ".cu", ".h", ".py", ".in")


def folder_rows():
    """The file table's rows: folder -> the text of its row."""
    rows = {}
    with open(PAGE) as f:
        text = f.read()
    table = text[text.index("| folder | holds |"):]
    for line in table.splitlines()[2:]:
        if not line.startswith("|"):
            break
        cells = line.split("|")
        names = re.findall(r"`([^`]+)`", cells[1])
        holds = "|".join(cells[2:])
        for name in names:
            rows[name.rstrip("/")] = holds
    return rows


def source_folders():
    """Every folder under SOURCE_ROOTS with source files: folder -> names."""
    out = {}
    for root in SOURCE_ROOTS:
        for folder, dirs, files in os.walk(os.path.join(ROOT, root)):
            dirs[:] = [d for d in dirs if not d.startswith((".", "__"))]
            sources = sorted(f for f in files if f.endswith(EXTENSIONS))
            if sources:
                out[os.path.relpath(folder, ROOT)] = sources
    return out


class ArchitecturePage(unittest.TestCase):
    def test_every_source_folder_has_a_row(self):
        rows = folder_rows()
        missing = sorted(set(source_folders()) - set(rows))
        self.assertEqual(missing, [], "folders with no row in the file "
                         "table of docs/architecture.md")

    def test_every_source_file_is_named_in_its_folders_row(self):
        rows = folder_rows()
        unnamed = []
        for folder, files in sorted(source_folders().items()):
            named = set(re.findall(r"`([^`]+)`", rows.get(folder, "")))
            # A name covers its stem's files: `kernels.cu` its header too.
            stems = {os.path.basename(n).split(".")[0] for n in named}
            for name in files:
                if name in named or name.split(".")[0] in stems:
                    continue
                # A file named with its folder (`troupe/__init__.py`).
                if any(n.endswith("/" + name) for n in named):
                    continue
                unnamed.append(os.path.join(folder, name))
        self.assertEqual(unnamed, [], "source files that docs/"
                         "architecture.md does not name in their folder's "
                         "row")

    def test_every_file_the_page_names_exists(self):
        with open(PAGE) as f:
            text = f.read()
        rows = folder_rows()
        gone = []
        for name in sorted(set(re.findall(r"`([^` ]+\.(?:cpp|hpp|cu|py))`",
                                          text))):
            candidates = [os.path.join(ROOT, name)] + [
                os.path.join(ROOT, folder, name) for folder in rows]
            if not any(os.path.isfile(c) for c in candidates):
                gone.append(name)
        self.assertEqual(gone, [], "files docs/architecture.md names that "
                         "are not in the tree")


if __name__ == "__main__":
    unittest.main()
