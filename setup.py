"""The C part of the package (everything else is in pyproject.toml): records._walk, the record walker."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("odradek.records._walk", ["odradek/records/_walk.c"],
                             extra_compile_args=["-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter"])])
