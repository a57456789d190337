"""The C part of the package (everything else is in pyproject.toml): records._walk, the record walker,
records._crc32c, the batch checksum read in place, records._batch, the batch header checks, broker._frame_buffer,
unzeroed buffers for large frames, protocol._codec, the encoders and decoders of the protocol's structs, and
storage._offset_map, the cleaner's key -> offset table; and odradek-spark.pth, installed beside the packages, which
makes Spark's Python workers run the driver's interpreter (odradek/spark/worker_python.py)."""

import os

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

_C_FLAGS = ["-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter"]
_PTH = "odradek-spark.pth"


class _BuildPyWithPth(build_py):
    """build_py, and the .pth file at the top of what is installed (an editable install's wheel in editable mode)."""

    def run(self):
        super().run()
        top = self.get_finalized_command("install").install_lib if self.editable_mode else self.build_lib
        self.copy_file(os.path.join("odradek", "spark", _PTH), os.path.join(top, _PTH))

    def get_outputs(self, include_bytecode=True):
        built = super().get_outputs(include_bytecode)
        return built if self.editable_mode else [*built, os.path.join(self.build_lib, _PTH)]


setup(cmdclass={"build_py": _BuildPyWithPth},
      ext_modules=[Extension("odradek.records._walk", ["odradek/records/_walk.c"], extra_compile_args=_C_FLAGS),
                   Extension("odradek.records._crc32c", ["odradek/records/_crc32c.c"], extra_compile_args=_C_FLAGS),
                   Extension("odradek.records._batch", ["odradek/records/_batch.c"], extra_compile_args=_C_FLAGS),
                   Extension("odradek.broker._frame_buffer", ["odradek/broker/_frame_buffer.c"],
                             extra_compile_args=_C_FLAGS),
                   Extension("odradek.protocol._codec", ["odradek/protocol/_codec.c"], extra_compile_args=_C_FLAGS),
                   Extension("odradek.storage._offset_map", ["odradek/storage/_offset_map.c"],
                             extra_compile_args=_C_FLAGS, libraries=["m"])])
