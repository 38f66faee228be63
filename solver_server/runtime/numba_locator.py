"""A numba cache locator that keys Clearance's kernels by their place in the package, not on disk.

numba's own locator for ``NUMBA_CACHE_DIR`` (``UserProvidedCacheLocator``) files every kernel
under a sub-folder named by the SHA-1 of the *absolute* folder of its source file. The same
sources at another path — a second checkout, the package installed into the server's venv,
a copy the add-on or a farm node runs — therefore find none of the kernels compiled before
and compile everything again (measured: 58 kernels, 117 s instead of 5 s for a 3-frame IPC
bake), while the "warm" marker of :mod:`kernel_cache`, shared by all of them, says there is
nothing to compile, so the long compile showed no "compiling" state.

:class:`PackageRelativeLocator` files a kernel of ``solver_server/contact/ccd.py`` under
``<cache dir>/solver_server/contact`` wherever the package lives. That is safe only
because the cache folder itself is named by a fingerprint of every source file of the
package (:func:`kernel_cache.source_fingerprint`): two trees that share a folder have the
same sources. The locator therefore declines (numba's default locators take over) for files
outside the package, and when ``NUMBA_CACHE_DIR`` is not the folder of these sources (a user
who set it by hand keeps numba's path-keyed behaviour).

numba imports this module through ``NUMBA_CACHE_LOCATOR_CLASSES``, which
:func:`kernel_cache.configure` sets; importing it needs numba, so nothing else imports it.
"""
from __future__ import annotations

import os
from typing import Any, Optional

from numba.core import config
from numba.core.caching import UserProvidedCacheLocator

from . import kernel_cache

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # solver_server/ (this file is in runtime/)


def package_subpath(py_file: str) -> Optional[str]:
    """``solver_server/<folder of py_file inside the package>``, or None outside the package."""
    folder = os.path.dirname(os.path.abspath(py_file))
    rel = os.path.relpath(folder, _PACKAGE)
    if rel == os.pardir or rel.startswith(os.pardir + os.sep) or os.path.isabs(rel):
        return None
    return os.path.normpath(os.path.join("solver_server", rel))


class PackageRelativeLocator(UserProvidedCacheLocator):
    """Cache kernels of the solver_server package under their package-relative folder."""

    @classmethod
    def from_function(cls, py_func: Any, py_file: str) -> Optional["PackageRelativeLocator"]:
        if package_subpath(py_file) is None or not config.CACHE_DIR:
            return None
        if os.path.basename(os.path.normpath(config.CACHE_DIR)) != kernel_cache.source_fingerprint():
            return None
        return super().from_function(py_func, py_file)

    @classmethod
    def get_suitable_cache_subpath(cls, py_file: str) -> str:
        return package_subpath(py_file) or super().get_suitable_cache_subpath(py_file)
