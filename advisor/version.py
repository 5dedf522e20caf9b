"""The version of advisor: defined here once (the package's metadata reads it at build time: pyproject.toml
[tool.hatch.version]), so ``advisor --version`` needs no package-metadata lookup."""

__version__ = "0.1.0"
VERSION = __version__
