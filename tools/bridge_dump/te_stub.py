"""Permissive import-time stub for transformer_engine (not installable on this CPU box).

Installs a sys.meta_path finder that synthesizes `transformer_engine` and any
`transformer_engine.*` submodule. Any attribute of those modules is a dummy
class (subclassable, callable, attribute-chainable). `__version__` is set to the
TE version Bridge's uv.lock pins (2.18.0) so megatron-core version gates behave
as they would with the real package. No TE functionality is emulated; only
config construction/serialization is exercised.
"""
import importlib.abc
import importlib.machinery
import sys
import types

import torch

TE_VERSION = "2.18.0"
STUB_LOG = []  # (module, attribute) pairs actually touched


class _StubMeta(type):
    def __getattr__(cls, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        sub = _StubMeta(name, (_Stub,), {"__module__": cls.__module__})
        setattr(cls, name, sub)
        return sub

    def __bool__(cls):
        return True


class _Stub(torch.nn.Module, metaclass=_StubMeta):
    # nn.Module base so libraries that register TE classes as modules (modelopt) accept them
    def __init__(self, *args, **kwargs):
        torch.nn.Module.__init__(self)

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return args[0]
        return _Stub()

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _Stub()


class _StubModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        STUB_LOG.append((self.__name__, name))
        cls = _StubMeta(name, (_Stub,), {"__module__": self.__name__})
        setattr(self, name, cls)
        return cls


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    ROOT = "transformer_engine"

    def find_spec(self, fullname, path=None, target=None):
        if fullname == self.ROOT or fullname.startswith(self.ROOT + "."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        m = _StubModule(spec.name)
        m.__path__ = []
        if spec.name == self.ROOT:
            m.__version__ = TE_VERSION
        if spec.name == self.ROOT + ".pytorch.optimizers":
            # megatron-core OptimizerConfig.__post_init__ inspects this signature when
            # use_precision_aware_optimizer=True; real TE 2.x FusedAdam accepts these kwargs.
            class FusedAdam(_Stub):
                def __init__(self, params=None, lr=1e-3, bias_correction=True, betas=(0.9, 0.999),
                             eps=1e-8, weight_decay=0.0, amsgrad=False, *, master_weights=False,
                             master_weight_dtype=None, exp_avg_dtype=None, exp_avg_sq_dtype=None,
                             use_decoupled_grad=False, **kwargs):
                    _Stub.__init__(self)
            FusedAdam.__module__ = spec.name
            m.FusedAdam = FusedAdam
        STUB_LOG.append((spec.name, "<module>"))
        return m

    def exec_module(self, module):
        pass


def install():
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
