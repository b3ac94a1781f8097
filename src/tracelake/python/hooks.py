"""The I/O calls of `collect.python_io.HOOKS`, wrapped so a tracked run sees each one return.

`install` wraps every hooked function or method of the modules already imported, and patches a
module imported later as its import ends (a finder on `sys.meta_path` whose loader runs the
real one, then patches). Installed once per process and left in place: with no run going, a
wrapped call costs a context-variable read and a list check before the original runs.

With a run going, the original runs first, untouched: its exception, if any, is the caller's
and nothing is recorded. Then the run is shown the call (`Observer.saw`), which never raises
into the caller's code. A hooked call made inside another (pandas' `to_parquet` calling
pyarrow's `write_table`, `read_pickle` calling `pickle.load`) is the outer call's business and
is not shown again.

Which run sees a call: the one entered in this context (`with tracelake.python.track(...)`,
followed through `await`s and into threads given the context), else the latest run started
in the process (threads start with an empty context: a data loader's worker thread still
counts for the training run that started it). A name bound before `install`
(`from pandas import read_parquet` at import time, before any run) keeps the original function
and is not seen: call through the module (`pd.read_parquet`) or methods (`df.to_parquet`).
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import sys
import threading
from collections.abc import Callable, Sequence
from contextvars import ContextVar, Token
from types import ModuleType
from typing import Any, Protocol

from tracelake.collect.python_io import HOOKS, Call, Hook


class Observer(Protocol):
    def saw(self, hook: Hook, call: Call) -> None: ...


_current: ContextVar[Observer | None] = ContextVar("tracelake_python_run", default=None)
_inside: ContextVar[bool] = ContextVar("tracelake_python_hook", default=False)
_active: list[Observer] = []  # the runs going on in this process, latest last
_lock = threading.Lock()
_pending: dict[str, list[Hook]] = {}  # module not imported yet → its hooks
_patched: set[str] = set()  # `module.attribute` of every call wrapped
_installed = False


def observer() -> Observer | None:
    """The run that sees a call made here, if any (see the module docstring)."""
    found = _current.get()
    if found is not None:
        return found
    return _active[-1] if _active else None


def start(run: Observer) -> None:
    with _lock:
        _active.append(run)


def finish(run: Observer) -> None:
    with _lock:
        if run in _active:
            _active.remove(run)


def enter(run: Observer) -> Token[Observer | None]:
    return _current.set(run)


def leave(token: Token[Observer | None]) -> None:
    try:
        _current.reset(token)
    except ValueError:  # left in another context than it was entered in: forget it there
        _current.set(None)


def install(hooks: Sequence[Hook] = HOOKS) -> None:
    """Wrap `hooks` in this process, now for imported modules, at import for the others."""
    global _installed
    with _lock:
        if _installed:
            return
        for hook in hooks:
            module = sys.modules.get(hook.module)
            if module is not None:
                _patch(module, hook)
            else:
                _pending.setdefault(hook.module, []).append(hook)
        if _pending:
            sys.meta_path.insert(0, _PatchOnImport())
        _installed = True


def patched() -> frozenset[str]:
    """The calls wrapped so far (`module.attribute`)."""
    with _lock:
        return frozenset(_patched)


def _patch(module: ModuleType, hook: Hook) -> None:
    owner: Any = module
    *classes, name = hook.attribute.split(".")
    for class_name in classes:
        owner = getattr(owner, class_name, None)
        if owner is None:
            return  # this version of the library has no such class
    original = getattr(owner, name, None)
    if original is None or getattr(original, "__tracelake_hook__", None) is not None:
        return
    setattr(owner, name, _wrapped(original, hook))
    _patched.add(hook.call)


def _wrapped(original: Callable[..., Any], hook: Hook) -> Callable[..., Any]:
    @functools.wraps(original)
    def traced(*args: Any, **kwargs: Any) -> Any:
        run = observer()
        if run is None or _inside.get():
            return original(*args, **kwargs)
        token = _inside.set(True)
        try:
            result = original(*args, **kwargs)
        finally:
            _inside.reset(token)
        run.saw(hook, Call(hook.call, args, kwargs, result))
        return result

    traced.__tracelake_hook__ = hook  # type: ignore[attr-defined]
    return traced


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Finds a hooked module with the finders after it, and gives it a loader that patches it
    once it has run."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in _pending:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec: importlib.machinery.ModuleSpec | None = find(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _PatchingLoader(spec.loader)
        return spec


class _PatchingLoader(importlib.abc.Loader):
    """The module's own loader (everything else asked of it goes to that one), patching the
    module's hooks once it has run."""

    def __init__(self, loader: Any) -> None:
        self._loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        created: ModuleType | None = self._loader.create_module(spec)
        return created

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        with _lock:
            for hook in _pending.pop(module.__name__, ()):
                _patch(module, hook)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)
