"""What a failed uv install says: a dependency the date filtered out, a C library's missing header, a failed
build (of a dependency or of the repo itself), a build backend without PEP 660 editables; and what to install on
the host for a missing header."""

from __future__ import annotations

import re

# a dependency with no release old enough for the date
FILTERED = re.compile(r"`([A-Za-z0-9._-]+)` was filtered by `exclude-newer(?:-package)?`")
# uv's hint when a resolution that may build nothing (`--only-binary :all:`) needs a release with no wheel here
NO_WHEEL = re.compile(r"Wheels are required for `([A-Za-z0-9._-]+)` because building from source is disabled")
# uv's hint on a release whose metadata it cannot read (pandas before 0.25 requires `pytz (>=2011k)`, a version
# PEP 440 refuses; pip of those years read it)
BAD_METADATA = re.compile(r"Metadata for `([A-Za-z0-9._-]+)` \(v([^)]+)\) could not be parsed")
# ...and its error when the repo itself (or a requirement given as a path or URL) would have to be built for it
SDIST_DISABLED = re.compile(r"Building source distributions for `([A-Za-z0-9._-]+)` is disabled")
# uv's hint when a dependency's sdist fails to compile for want of a C library's header
NO_LIBRARY = re.compile(r"need to install a library that provides `([^`]+)` for `([A-Za-z0-9._-]+)@([^`]+)`")
# Debian packages of the headers that SWE-bench's dependencies' sdists are known to compile against
HEADER_PACKAGES = {
    "libmemcached/memcached.h": "libmemcached-dev",
    "ffi.h": "libffi-dev",
    "libxml/xmlversion.h": "libxml2-dev",
    "libxslt/xsltconfig.h": "libxslt1-dev",
    "jpeglib.h": "libjpeg-dev",
    "zlib.h": "zlib1g-dev",
    "ft2build.h": "libfreetype-dev",
    "png.h": "libpng-dev",
    "openssl/ssl.h": "libssl-dev",
    "pg_config.h": "libpq-dev",
    "mysql.h": "default-libmysqlclient-dev",
    "tiffio.h": "libtiff-dev",
}
# uv's words for a failed build (of a dependency, or of the project itself), and for one of a local project
BUILD_FAILED = re.compile(r"Failed to build|The build backend returned an error")
DEPENDENCY_FAILED = re.compile(r"Failed to build `([A-Za-z0-9._-]+)==([^`]+)`")
LOCAL_BUILD_FAILED = re.compile(
    r"Failed to build `[^`]+ @ file://|^error: The build backend returned an error", re.M
)
# uv's hint naming how a dependency came in: "`llvmlite` (v0.34.0) was included because `pvlib[all]` (v0.6.3)
# depends on `numba` (v0.51.2) which depends on `llvmlite`"
INCLUDED_BECAUSE = re.compile(r"`([A-Za-z0-9._-]+)` \(v[^)]*\) was included because (.+)")
DEPENDS_ON = re.compile(r"depends on `([A-Za-z0-9._\[\],-]+)`")


def pinned_by(output: str, name: str) -> list[str]:
    """The dependencies between the project and ``name`` in uv's hint of how ``name`` came in, nearest first:
    the releases that pin it (widening ``name`` alone cannot help while one of them pins the dated release)."""
    for included, chain in INCLUDED_BECAUSE.findall(output):
        if included.lower() == name.lower():
            between = [p.split("[")[0] for p in DEPENDS_ON.findall(chain)]
            return [p for p in reversed(between) if p.lower() != name.lower()]
    return []


# uv's refusal of an option only pip has (scikit-learn's install: `pip install --no-use-pep517 ...`)
PIP_ONLY_OPTION = re.compile(r"error: unexpected argument '(-[^' ]+)' found")
# uv's failure on a build backend without PEP 660 editable support (setuptools < 64)
# (not any failed call of the hook: `setuptools.build_meta.build_editable` failed is an ordinary build error)
NO_PEP660 = re.compile(
    r"has no attribute 'build_editable'|does not support editable|Editable installs? .*not supported"
)


def missing_library(output: str) -> str:
    """What to install on the host when a build failed for want of a C library's header."""
    lines = []
    for header, name, version in dict.fromkeys(NO_LIBRARY.findall(output)):
        package = HEADER_PACKAGES.get(header)
        where = f"the Debian package {package}" if package else f"the -dev package that provides {header}"
        lines.append(f"\n{name} {version} compiles against {header}: install {where} on the host")
    return "".join(lines)
