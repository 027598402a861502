"""Build of the `tidemq_speedups` C extension (zlib's crc32, as Python's zlib.crc32 uses; dl to
find ISA-L's in python-isal at run time)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "tidemq_speedups",
            sources=["src/tidemq_speedups.c"],
            libraries=["z", "dl"],
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra", "-Werror=implicit"],
        )
    ],
)
