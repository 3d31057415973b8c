"""DLPack capsules through the C API (ctypes.pythonapi), with no compiled helper.

Import: a producer's "dltensor" capsule stays owned by the capsule object (its destructor calls
the deleter), which the imported view keeps alive. Export: a DLManagedTensor built here points
at an nnprim Tensor's memory; its deleter drops the reference that keeps the Tensor alive."""
import ctypes
import threading
from ctypes import POINTER, c_char_p, c_int, c_int64, c_void_p

from . import _abi
from .errors import Error

kDLCPU = _abi.kDLCPU
kDLCUDA = _abi.kDLCUDA
kDLCUDAHost = _abi.kDLCUDAHost

_api = ctypes.PyDLL(None)  # own function objects: argtypes here do not touch ctypes.pythonapi
_new = _api.PyCapsule_New
_new.restype = ctypes.py_object
_new.argtypes = [c_void_p, c_char_p, c_void_p]
_get = _api.PyCapsule_GetPointer
_get.restype = c_void_p
_get.argtypes = [ctypes.py_object, c_char_p]
_valid = _api.PyCapsule_IsValid
_valid.restype = c_int
_valid.argtypes = [ctypes.py_object, c_char_p]
# The destructor runs during the capsule's deallocation: it gets a raw pointer (a py_object
# would resurrect the dying capsule).
_raw_valid = ctypes.CDLL(None).PyCapsule_IsValid
_raw_valid.restype = c_int
_raw_valid.argtypes = [c_void_p, c_char_p]
_raw_get = ctypes.CDLL(None).PyCapsule_GetPointer
_raw_get.restype = c_void_p
_raw_get.argtypes = [c_void_p, c_char_p]

_DELETER = ctypes.CFUNCTYPE(None, POINTER(_abi.DLManagedTensor))
_DESTRUCTOR = ctypes.CFUNCTYPE(None, c_void_p)
_exported = {}  # address of a DLManagedTensor we made -> what keeps it and its tensor alive
_lock = threading.Lock()


def capsule_of(obj, stream=None):
    """(capsule, object to keep) of obj: a capsule as is, else obj.__dlpack__(), given the
    consumer's stream for CUDA producers (DLPack: 1 names the legacy default stream)."""
    if type(obj).__name__ == "PyCapsule":
        return obj, None
    if not hasattr(obj, "__dlpack__"):
        raise Error(_abi.NN_E_INVALID_ARG, "from_dlpack: %s has no __dlpack__: expected a "
                    "NumPy array, a torch tensor or a DLPack capsule" % type(obj).__name__,
                    "from_dlpack")
    if stream is not None and obj.__dlpack_device__()[0] == kDLCUDA:
        return obj.__dlpack__(stream=stream or 1), obj
    return obj.__dlpack__(), obj


def capsule_pointer(cap):
    if not _valid(cap, b"dltensor"):
        raise Error(_abi.NN_E_INVALID_ARG, "from_dlpack: the capsule is not an unconsumed "
                    "\"dltensor\" (already imported once?)", "from_dlpack")
    return _get(cap, b"dltensor")


@_DELETER
def _deleter(mt):
    with _lock:
        _exported.pop(ctypes.addressof(mt.contents), None)


@_DESTRUCTOR
def _destructor(cap):
    # A capsule nobody consumed still holds our DLManagedTensor: delete it as a consumer would.
    if _raw_valid(cap, b"dltensor"):
        p = _raw_get(cap, b"dltensor")
        with _lock:
            _exported.pop(p, None)


def export(tensor, nt):
    """A "dltensor" capsule viewing nt's memory that keeps tensor alive until deleted."""
    mt = _abi.DLManagedTensor()
    rank = nt.rank
    shape = (c_int64 * rank)(*nt.dims[:rank])
    strides = (c_int64 * rank)(*nt.strides[:rank])
    dl = mt.dl_tensor
    dl.data = nt.data
    if nt.space == _abi.NN_SPACE_DEVICE:
        dl.device.device_type, dl.device.device_id = kDLCUDA, nt.device
    else:
        dl.device.device_type, dl.device.device_id = kDLCPU, 0
    dl.ndim = rank
    code, bits = {_abi.NN_DTYPE_F32: (_abi.kDLFloat, 32), _abi.NN_DTYPE_F64: (_abi.kDLFloat, 64),
                  _abi.NN_DTYPE_F16: (_abi.kDLFloat, 16),
                  _abi.NN_DTYPE_BF16: (_abi.kDLBfloat, 16)}[nt.dtype]
    dl.dtype.code, dl.dtype.bits, dl.dtype.lanes = code, bits, 1
    dl.shape = ctypes.cast(shape, c_void_p)
    dl.strides = ctypes.cast(strides, c_void_p)
    dl.byte_offset = 0
    mt.deleter = ctypes.cast(_deleter, c_void_p)
    addr = ctypes.addressof(mt)
    with _lock:
        _exported[addr] = (mt, shape, strides, tensor)
    return _new(c_void_p(addr), b"dltensor", ctypes.cast(_destructor, c_void_p))


def exported_count():
    """DLManagedTensors made here not yet deleted (for tests)."""
    with _lock:
        return len(_exported)


__all__ = ["capsule_of", "capsule_pointer", "export", "exported_count"]
