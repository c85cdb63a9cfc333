"""Runs a function on a module right after its first import, without
importing it ahead of the user (PIL is slow to import and may be absent):
a finder first on sys.meta_path asks the others for the module's spec and
wraps its loader."""

import importlib.abc
import sys


class _Loader(importlib.abc.Loader):
    """Delegates to the real loader, then calls the hook."""

    def __init__(self, loader, hook):
        self._loader = loader
        self._hook = hook

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        try:
            self._hook(module)
        except Exception:  # a hook must never break the user's import
            pass

    def __getattr__(self, name):  # get_source, is_package, ... for tracebacks and pkgutil
        return getattr(self._loader, name)


class PostImportFinder(importlib.abc.MetaPathFinder):
    def __init__(self, hooks):
        self.hooks = dict(hooks)  # module name -> fn(module)

    def find_spec(self, fullname, path=None, target=None):
        hook = self.hooks.get(fullname)
        if hook is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _Loader(spec.loader, hook)
        return spec


def install(hooks):
    """Puts the finder first on sys.meta_path and runs the hooks at once
    for modules already imported."""
    for name, fn in hooks.items():
        mod = sys.modules.get(name)
        if mod is not None:
            fn(mod)
    sys.meta_path.insert(0, PostImportFinder(hooks))
