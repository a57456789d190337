"""The C part of the package (everything else is in pyproject.toml): records._walk, the record walker,
records._crc32c, the batch checksum read in place, records._batch, the batch header checks, broker._frame_buffer,
unzeroed buffers for large frames, protocol._codec, the encoders and decoders of the protocol's structs, and
storage._offset_map, the cleaner's key -> offset table."""

from setuptools import Extension, setup

_C_FLAGS = ["-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter"]

setup(ext_modules=[Extension("odradek.records._walk", ["odradek/records/_walk.c"], extra_compile_args=_C_FLAGS),
                   Extension("odradek.records._crc32c", ["odradek/records/_crc32c.c"], extra_compile_args=_C_FLAGS),
                   Extension("odradek.records._batch", ["odradek/records/_batch.c"], extra_compile_args=_C_FLAGS),
                   Extension("odradek.broker._frame_buffer", ["odradek/broker/_frame_buffer.c"],
                             extra_compile_args=_C_FLAGS),
                   Extension("odradek.protocol._codec", ["odradek/protocol/_codec.c"], extra_compile_args=_C_FLAGS),
                   Extension("odradek.storage._offset_map", ["odradek/storage/_offset_map.c"],
                             extra_compile_args=_C_FLAGS, libraries=["m"])])
