"""Ship the catalog data (recipes/, models/, targets/, kernels/, versions/, verified/) inside the wheel as optkit/data/.

Everything else is in pyproject.toml. In a source checkout (editable install) optkit reads the
data from the repository itself; an installed wheel reads its copy.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

DATA = ("recipes", "models", "targets", "kernels", "versions", "verified")


class BuildWithData(build_py):
    def run(self):
        super().run()
        root = Path(__file__).resolve().parent
        for name in DATA:
            dest = Path(self.build_lib) / "optkit" / "data" / name
            if dest.exists():
                shutil.rmtree(dest)
            shutil.copytree(root / name, dest, ignore=shutil.ignore_patterns("__pycache__"))


setup(cmdclass={"build_py": BuildWithData})
