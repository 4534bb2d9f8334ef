"""setuptools hook (the rest is in pyproject.toml): ship the bundled example
tasks inside the package, as kgym/examples/<backend>/<task>/{task.json,
expected.json, candidates/*.json}, so an installed client finds
"cpu/gelu_f32" without the repository (kgym.tasks.examples_places).
They are copied from the repository's examples/ beside this folder."""

from pathlib import Path
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def example_files():
    """(source, path under examples/) of every file an example task needs."""
    for task in sorted(EXAMPLES.glob("*/*/task.json")):
        folder = task.parent
        for f in [task, folder / "expected.json"] + sorted((folder / "candidates").glob("*.json")):
            if f.is_file():
                yield f, f.relative_to(EXAMPLES)


class BuildPyWithExamples(build_py):
    """build_py, then the example tasks into the built package."""

    def run(self):
        super().run()
        files = list(example_files())
        if not files:
            raise SystemExit("kgym: no example tasks under %s: build from a kgym checkout "
                             "(the package ships them)" % EXAMPLES)
        target = Path(self.build_lib) / "kgym" / "examples"
        for source, rel in files:
            dest = target / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, dest)


setup(cmdclass={"build_py": BuildPyWithExamples})
