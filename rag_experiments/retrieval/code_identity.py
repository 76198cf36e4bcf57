"""What a Python target's answers depend on in code: the digests of the project-local modules it
imports, transitively, and the versions of the installed packages it imports.

A target ``my_rag.search:retrieve`` whose module imports ``my_rag.chunking`` answers differently
when ``chunking.py`` changes, though ``search.py`` did not: a cache keyed by ``search.py`` alone
served the old answers (issue 49, B2). Here the target module's source is read for its imports
(``import a.b``, ``from . import c``, ``from .d import e``, at any depth, inside functions too:
a lazy import counts), each is located without importing it, and:

* a module whose file lives outside the standard library and the site-packages folders
  (the working folder, the target's folder, an editable install) is *project-local*: its
  file's sha256 is recorded and its own imports are followed;
* a module inside site-packages is recorded as its distribution's version
  (``package:langchain-core==1.8.0``), not followed (the version says it);
* a standard-library or built-in module is not recorded (the Python version is).

Data files a target reads (an index on disk, a model file) are not code: declare
``retrieval.external.version`` when they change, or ``retrieval.external.cache=false``.

Digests are memoised per process by each file's (device, inode, size, mtime), so a sweep does not
re-read its files for every point.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import os
import site
import sys
import sysconfig
from functools import lru_cache
from importlib.machinery import PathFinder
from importlib.metadata import PackageNotFoundError, packages_distributions, version
from pathlib import Path
from types import ModuleType

from ..cache_key import digest, file_identity

#: a bound on the files followed (a target importing a huge local tree still loads)
MAX_FILES = 5000


@lru_cache(maxsize=1)
def _outside_roots() -> tuple[str, ...]:
    """Folders whose modules are not project-local: the standard library and site-packages."""
    roots = set()
    for name in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(name)
        if path:
            roots.add(path)
    for path in [*getattr(site, "getsitepackages", lambda: [])(), site.getusersitepackages()]:
        roots.add(path)
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}:
        roots.add(os.path.join(prefix, "lib"))
        roots.add(os.path.join(prefix, "lib64"))
    return tuple(sorted(os.path.realpath(r) + os.sep for r in roots if r))


def is_project_local(path: str) -> bool:
    real = os.path.realpath(path)
    return not any(real.startswith(root) for root in _outside_roots())


_DIGESTS: dict[tuple, str] = {}


def file_digest(path: str) -> str:
    p = Path(path)
    ident = (str(p), *file_identity(p))
    if ident not in _DIGESTS:
        _DIGESTS[ident] = hashlib.sha256(p.read_bytes()).hexdigest()
    return _DIGESTS[ident]


def _spec_origin(name: str) -> tuple[str | None, bool]:
    """(file, is_package) of module ``name`` without importing it; (None, False) when it is not
    found or has no file (built-in, frozen, namespace package)."""
    module = sys.modules.get(name)
    if module is not None:
        path = getattr(module, "__file__", None)
        return (path if path and os.path.isfile(path) else None), hasattr(module, "__path__")
    parts = name.split(".")
    try:
        spec = importlib.util.find_spec(parts[0])  # a top-level name: found, never imported
        for i in range(1, len(parts)):
            parent = sys.modules.get(".".join(parts[:i]))
            locations = getattr(parent, "__path__", None) if parent is not None else (
                spec.submodule_search_locations if spec is not None else None)
            if not locations:
                return None, False
            spec = PathFinder.find_spec(parts[i], list(locations))
    except (ImportError, ValueError, AttributeError):
        return None, False
    if spec is None or not spec.has_location or not spec.origin or not os.path.isfile(spec.origin):
        return None, False
    return spec.origin, spec.submodule_search_locations is not None


_IMPORTS: dict[tuple, frozenset[str]] = {}


def _imports(path: str, module_name: str, is_package: bool) -> frozenset[str]:
    """Absolute names of the modules the source at ``path`` imports (with their parents)."""
    try:
        key = (path, module_name, is_package, *file_identity(Path(path)))
    except OSError:
        return frozenset()
    if key not in _IMPORTS:
        _IMPORTS[key] = _parse_imports(path, module_name, is_package)
    return _IMPORTS[key]


def _parse_imports(path: str, module_name: str, is_package: bool) -> frozenset[str]:
    try:
        tree = ast.parse(Path(path).read_bytes(), filename=path)
    except (SyntaxError, ValueError, OSError):
        return frozenset()
    package = module_name if is_package else module_name.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".") if package else []
                if node.level - 1 > len(base_parts):
                    continue
                base = ".".join(base_parts[: len(base_parts) - (node.level - 1)])
                base = f"{base}.{node.module}" if node.module and base else (node.module or base)
            else:
                base = node.module or ""
            if not base:
                continue
            names.add(base)
            names.update(f"{base}.{a.name}" for a in node.names if a.name != "*")  # maybe submodules
    out = set()
    for name in names:
        parts = name.split(".")
        out.update(".".join(parts[: i + 1]) for i in range(len(parts)))  # a package's __init__ runs too
    return frozenset(out)


@lru_cache(maxsize=1)
def _distributions() -> dict[str, list[str]]:
    try:
        return packages_distributions()
    except Exception:  # noqa: BLE001 - broken metadata: fall back to the import name
        return {}


def _package_version(top: str) -> str:
    for dist in _distributions().get(top, [top]):
        try:
            return f"{dist}=={version(dist)}"
        except PackageNotFoundError:
            continue
        except Exception:  # noqa: BLE001 - unreadable metadata: the name is all we have
            break
    return f"{top}==?"


def code_identity(module: ModuleType) -> dict[str, str]:
    """``{module name: "sha256:<hex>" | "package:<dist>==<version>"}`` for ``module`` and
    everything it imports that is not the standard library (see the module docstring)."""
    out: dict[str, str] = {}
    name = module.__name__
    path = getattr(module, "__file__", None)
    if not path or not os.path.isfile(path):
        top = name.split(".")[0]
        return {name: "package:" + _package_version(top)}
    todo = [(name, path, hasattr(module, "__path__"))]
    seen = {name}
    stdlib = set(getattr(sys, "stdlib_module_names", ()))
    while todo and len(out) < MAX_FILES:
        mod_name, mod_path, is_pkg = todo.pop()
        if not is_project_local(mod_path):
            top = mod_name.split(".")[0]
            if top not in stdlib:
                out[top] = "package:" + _package_version(top)
            continue
        out[mod_name] = "sha256:" + file_digest(mod_path)
        if not mod_path.endswith(".py"):
            continue  # a compiled extension: its bytes are its identity
        for dep in sorted(_imports(mod_path, mod_name, is_pkg)):
            if dep in seen or dep.split(".")[0] in stdlib or dep.split(".")[0] in sys.builtin_module_names:
                continue
            seen.add(dep)
            dep_path, dep_pkg = _spec_origin(dep)
            if dep_path is not None:
                todo.append((dep, dep_path, dep_pkg))
    return dict(sorted(out.items()))


def code_digest(module: ModuleType) -> str:
    """One sha256 over :func:`code_identity`: what a cache key and a run's strategy id carry."""
    return "code-sha256:" + digest(code_identity(module))
