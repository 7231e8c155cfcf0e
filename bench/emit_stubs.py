"""What bench/emit_check.py stands in for so that Megatron-LM's and DeepSpeed's own checks import on a
machine without a GPU, on Debian's PyTorch 1.13 (python3-torch) and NumPy 1.24. Only what needs a GPU,
torch >= 2 (or the Python and NumPy that come with it) and two packages Debian lacks is stubbed; every
stub used is recorded in STUBS and printed by the bench. Nothing here changes a framework's checks.
"""
import importlib
import importlib.abc
import importlib.machinery
import os
import sys
import types

sys.path.append('/usr/lib/python3/dist-packages')  # Debian's torch, numpy, yaml, msgpack beside pyenv's pydantic 2

STUBS = []  # (name, why), in the order first used


def record(name, why):
    if (name, why) not in STUBS:
        STUBS.append((name, why))


class _StubMeta(type):
    """A stand-in class: any attribute is another stand-in, calling it with a function returns the
    function (a decorator), it is falsy, iterates as empty and can be subclassed and used in `X | None`."""

    def __getattr__(cls, name):
        if name.startswith('__'):
            raise AttributeError(name)
        return stub(cls.__name__ + '.' + name)

    def __call__(cls, *args, **kwargs):
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return args[0]
        return super().__call__()

    def __iter__(cls):
        return iter(())

    def __bool__(cls):
        return False


class _StubBase(metaclass=_StubMeta):
    def __getattr__(self, name):
        if name.startswith('__'):
            raise AttributeError(name)
        return stub(type(self).__name__ + '.' + name)

    def __call__(self, *args, **kwargs):
        return stub(type(self).__name__ + '()')

    def __bool__(self):
        return False

    def __iter__(self):
        return iter(())


def stub(name):
    return _StubMeta(name, (_StubBase,), {})


class _StubModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith('__'):
            raise AttributeError(name)
        return stub(self.__name__ + '.' + name)


def _missing_attributes_are_stubs(module):
    """torch >= 2 names (dtypes, classes, functions) that a torch 1.13 module lacks become stand-ins."""
    if '__getattr__' in vars(module) or not str(getattr(module, '__file__', '')).endswith('.py'):
        return module

    def __getattr__(name):
        if name.startswith('__'):
            raise AttributeError(name)
        record(module.__name__ + '.' + name, 'torch >= 2')
        return stub(module.__name__ + '.' + name)

    try:
        module.__getattr__ = __getattr__
    except (AttributeError, TypeError):
        pass
    return module


class _AlreadyImported(importlib.abc.Loader):
    def create_module(self, spec):
        return sys.modules[spec.name]

    def exec_module(self, module):
        pass


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports a module under one of `prefixes` for real; when that fails (a torch >= 2 module, a GPU
    compiler), a stand-in module takes its place and the failure is recorded."""

    def __init__(self, prefixes, why):
        self.prefixes, self.why, self.trying = prefixes, why, set()

    def find_spec(self, name, path, target=None):
        if not name.startswith(self.prefixes) or name in self.trying:
            return None
        self.trying.add(name)
        try:
            _missing_attributes_are_stubs(importlib.import_module(name))
            return importlib.machinery.ModuleSpec(name, _AlreadyImported())
        except Exception as error:  # noqa: BLE001 - any failure to import means: needs what this machine lacks
            for key in [k for k in sys.modules if k == name or k.startswith(name + '.')]:
                del sys.modules[key]
            top = next(p for p in self.prefixes if name.startswith(p))
            record(name, self.why.get(top, 'torch >= 2') if 'tensorboard' not in str(error) else 'tensorboard, not installed')
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        finally:
            self.trying.discard(name)

    def create_module(self, spec):
        module = _StubModule(spec.name)
        module.__path__ = []
        module.__version__ = '3.4.0'
        return module

    def exec_module(self, module):
        pass


def install(framework):
    """Stubs for `framework` ('megatron' or 'deepspeed'): Megatron imports triton (a GPU compiler) and
    numpy.dtypes (NumPy >= 1.25) unconditionally; DeepSpeed imports einops and hjson (not in Debian)."""
    import torch  # before the finder: torch's own C extension modules load as they are

    why = {'torch.': 'torch >= 2', 'triton': 'GPU compiler', 'numpy.dtypes': 'NumPy >= 1.25',
           'einops': 'not in Debian; tensor code the checks never run'}
    prefixes = ('torch.', 'triton', 'numpy.dtypes') if framework == 'megatron' else ('torch.', 'einops')
    sys.meta_path.insert(0, _StubFinder(prefixes, why))
    for name, module in list(sys.modules.items()):
        if name.startswith('torch') and isinstance(module, types.ModuleType):
            _missing_attributes_are_stubs(module)

    # TorchScript of 1.13 rejects code written for torch 2 (Megatron's norms); scripting only compiles.
    import torch.jit
    if framework == 'megatron':
        torch.jit.script = lambda fn=None, *a, **k: fn if fn is not None else (lambda f: f)
        record('torch.jit.script (identity)', 'TorchScript 1.13 rejects torch 2 code')

    # A GPU query: a Hopper GPU (H100, H200), compute capability 9.0, where Megatron's
    # CUDA_DEVICE_MAX_CONNECTIONS rule holds (it is lifted from Blackwell, 10.0, on).
    class _Hopper:
        major, minor, name, total_memory, multi_processor_count = 9, 0, 'stub-sm90', 80 << 30, 132

    torch.cuda.get_device_properties = lambda *a, **k: _Hopper()
    torch.cuda.get_device_capability = lambda *a, **k: (9, 0)
    record('torch.cuda.get_device_properties, get_device_capability (9.0)', 'GPU query')

    # Custom operators that torch.library.custom_op (torch >= 2.4) would have registered.
    import torch._ops
    real = torch._ops._OpNamespace.__getattr__

    def op(namespace, name):
        try:
            return real(namespace, name)
        except (AttributeError, RuntimeError):
            record('torch.ops.%s.%s' % (namespace.name, name), 'torch >= 2.4 custom op')
            return stub('torch.ops.%s.%s' % (namespace.name, name))

    torch._ops._OpNamespace.__getattr__ = op

    import typing
    if framework == 'megatron' and not hasattr(typing, 'override'):  # Megatron-LM needs Python 3.12; Debian's torch is built for 3.11
        import typing_extensions
        typing.override = typing_extensions.override
        record('typing.override (typing_extensions.override)', 'Python 3.12')

    if framework == 'deepspeed':
        try:
            import hjson  # noqa: F401
        except ImportError:  # not in Debian; the emitted config is plain JSON, which json reads the same
            import json
            hjson = types.ModuleType('hjson')
            hjson.load, hjson.loads, hjson.dumps = json.load, json.loads, json.dumps
            sys.modules['hjson'] = hjson
            record('hjson (json reads the emitted plain JSON the same)', 'not in Debian')
    os.environ.setdefault('RANK', '0')
