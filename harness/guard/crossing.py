"""What crosses between the suite and a kernel's own process: plain data and tensors, never objects.

A message is one JSON header and the raw bytes of the tensors it names.  The
header holds plain values, and tagged ones for what JSON lacks: tuples,
frozensets, mappings, dtypes, formats, tensors (an index into the payloads)
and the suite's own records (:data:`RECORDS`: capabilities, precision
profiles, operations), each rebuilt through its constructor, so its checks
run.  Nothing else can be named, so nothing the kernel's process sends can run
code in the suite's: no pickle, no class of the kernel's, no tensor subclass
and no attribute on a tensor.  A tensor crosses as its whole storage and its
view (shape, strides, offset), so the receiver reads exactly the elements the
sender's view reads, and owns them.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Mapping
from multiprocessing import BufferTooShort
from multiprocessing.connection import Connection

import torch

from oracles.bounds import Arithmetic, PrecisionProfile, Reduction
from oracles.call import Call, Operation
from oracles.formats import FORMATS, Format

HEADER_BYTES = 1 << 22  # the longest header read: declarations and a precision profile are a few kB
# Attributes torch itself sets on the tensors it returns (torch.compile's output carries
# _dynamo_propagated_dynamic_indices): none crosses, as no attribute does, and none refuses the tensor.
TORCH_OWN = ("_dynamo_",)


class CrossingError(ValueError):
    """A message that is not one: malformed, too deep, or naming what cannot cross."""


@functools.cache
def records() -> dict[str, type]:
    """The suite's records that may cross, by name (imported here: specs imports the registered kernels)."""
    from specs.registry import Capabilities

    return {cls.__name__: cls for cls in (Arithmetic, PrecisionProfile, Reduction, Operation, Capabilities)}


DTYPES = {str(dtype).removeprefix("torch."): dtype for dtype in (
    torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16, torch.int8,
    torch.uint8, torch.bool, torch.complex64, torch.complex128)}


def encode(value, payloads: list[torch.Tensor]):
    """``value`` as JSON-able data; its tensors are appended to ``payloads``."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, torch.Tensor):
        payloads.append(plain_tensor(value))
        return {"tensor": len(payloads) - 1}
    if isinstance(value, torch.dtype):
        return {"dtype": str(value).removeprefix("torch.")}
    if isinstance(value, Format):
        return {"format": value.name}
    if isinstance(value, tuple):
        return {"tuple": [encode(v, payloads) for v in value]}
    if isinstance(value, list):
        return [encode(v, payloads) for v in value]
    if isinstance(value, (set, frozenset)):
        return {"frozenset": [encode(v, payloads) for v in value]}
    if isinstance(value, Mapping):
        return {"map": [[encode(k, payloads), encode(v, payloads)] for k, v in value.items()]}
    if isinstance(value, Call):
        return {"call": {f.name: encode(getattr(value, f.name), payloads) for f in dataclasses.fields(Call)}}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        name = next((name for name, cls in records().items() if isinstance(value, cls)), None)
        if name is None:
            raise CrossingError(f"a {type(value).__name__} cannot cross: only {', '.join(records())} records do")
        fields = {f.name: encode(getattr(value, f.name), payloads) for f in dataclasses.fields(records()[name])}
        return {"record": name, "fields": fields}
    raise CrossingError(f"a {type(value).__name__} cannot cross (plain values, tensors and the suite's records only)")


def decode(data, payloads: list[torch.Tensor]):
    """The value :func:`encode` gave ``data`` for; CrossingError for anything else."""
    if data is None or isinstance(data, (bool, int, float, str)):
        return data
    if isinstance(data, list):
        return [decode(v, payloads) for v in data]
    if not isinstance(data, dict) or len(data) not in (1, 2):
        raise CrossingError(f"not a crossing value: {str(data)[:80]}")
    tag = next(iter(data))
    body = data[tag]
    if tag == "tensor" and isinstance(body, int) and 0 <= body < len(payloads):
        return payloads[body]
    if tag == "dtype" and body in DTYPES:
        return DTYPES[body]
    if tag == "format" and body in {f.name for f in FORMATS}:
        return next(f for f in FORMATS if f.name == body)
    if tag == "tuple" and isinstance(body, list):
        return tuple(decode(v, payloads) for v in body)
    if tag == "frozenset" and isinstance(body, list):
        return frozenset(decode(v, payloads) for v in body)
    if tag == "map" and isinstance(body, list) and all(isinstance(p, list) and len(p) == 2 for p in body):
        return {decode(k, payloads): decode(v, payloads) for k, v in body}
    if tag == "call" and isinstance(body, dict) and set(body) <= {f.name for f in dataclasses.fields(Call)}:
        return Call(**{name: decode(value, payloads) for name, value in body.items()})
    if tag == "record" and body in records() and isinstance(data.get("fields"), dict):
        cls = records()[body]
        known = {f.name for f in dataclasses.fields(cls)}
        if not set(data["fields"]) <= known:
            raise CrossingError(f"{body} has no field(s) {sorted(set(data['fields']) - known)}")
        try:
            return cls(**{name: decode(v, payloads) for name, v in data["fields"].items()})
        except (TypeError, ValueError) as error:
            raise CrossingError(f"{body}: {error}") from None
    raise CrossingError(f"not a crossing value: {str(data)[:80]}")


def plain_tensor(t: torch.Tensor) -> torch.Tensor:
    """``t`` if it is a plain dense tensor without attributes; CrossingError naming what it is otherwise."""
    if type(t) is not torch.Tensor:
        raise CrossingError(f"a tensor subclass ({type(t).__name__}) cannot cross: return a plain torch.Tensor")
    attributes = [name for name in vars(t) if not name.startswith(TORCH_OWN)]
    if attributes:
        raise CrossingError(f"a tensor carrying attributes ({', '.join(sorted(attributes))}) cannot cross: return a "
                            "plain torch.Tensor")
    if t.layout != torch.strided or t.is_nested or t.device.type == "meta" or t.dtype not in DTYPES.values():
        raise CrossingError(f"a {t.layout} {t.dtype} tensor on {t.device.type} cannot cross: dense tensors only")
    return t


def view_meta(t: torch.Tensor) -> dict:
    return {"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape), "stride": list(t.stride()),
            "offset": t.storage_offset(), "bytes": t.untyped_storage().nbytes(), "device": str(t.device)}


def storage_bytes(t: torch.Tensor) -> memoryview:
    """The bytes of ``t``'s whole storage, on the host."""
    storage = t.untyped_storage()
    host = storage if storage.device.type == "cpu" else storage.cpu()
    return memoryview(torch.empty(0, dtype=torch.uint8).set_(host).numpy())


def rebuilt(meta: dict, conn: Connection, backend: str) -> torch.Tensor:
    """The tensor :func:`view_meta` describes, its storage's bytes read from ``conn`` into a storage of its own, on
    its device: the CPU or one of ``backend``'s."""
    dtype = DTYPES.get(meta.get("dtype"))
    size = meta.get("bytes")
    if dtype is None or not isinstance(size, int) or size < 0:
        raise CrossingError(f"not a tensor's description: {str(meta)[:120]}")
    data = bytearray(size)
    if conn.recv_bytes_into(data) != size:
        raise CrossingError(f"a tensor's bytes do not match its description: {str(meta)[:120]}")
    try:
        device = torch.device(meta["device"])
    except (RuntimeError, TypeError) as error:
        raise CrossingError(f"a tensor's device: {error}") from None
    if device.type not in ("cpu", backend):
        raise CrossingError(f"a tensor on {device}, neither the CPU nor a {backend} device")
    host = torch.frombuffer(data, dtype=torch.uint8) if size else torch.empty(0, dtype=torch.uint8)
    storage = host.to(device).untyped_storage()
    try:
        t = torch.empty(0, dtype=dtype, device=device).set_(storage, meta["offset"], meta["shape"], meta["stride"])
    except (RuntimeError, TypeError) as error:
        raise CrossingError(f"a tensor's view does not fit its storage: {error}") from None
    return t


def send(conn: Connection, message: dict) -> None:
    """``message`` (plain data, tensors, records) as its header and its tensors' bytes."""
    payloads: list[torch.Tensor] = []
    header = encode(message, payloads)
    conn.send_bytes(json.dumps({"message": header, "tensors": [view_meta(t) for t in payloads]}).encode())
    for t in payloads:
        conn.send_bytes(storage_bytes(t))


def receive(conn: Connection, backend: str, max_bytes: int | None = None) -> dict:
    """A message :func:`send` sent, its tensors rebuilt on their devices (the CPU or ``backend``'s); CrossingError if
    it is not one, or if its tensors hold more than ``max_bytes`` together."""
    try:
        header = json.loads(conn.recv_bytes(HEADER_BYTES))
        metas = header["tensors"]
        claimed = sum(meta.get("bytes", 0) if isinstance(meta.get("bytes"), int) else 0 for meta in metas)
        if max_bytes is not None and claimed > max_bytes:
            raise CrossingError(f"tensors of {claimed} bytes, more than the {max_bytes} an answer may hold")
        payloads = [rebuilt(meta, conn, backend) for meta in metas]
        message = decode(header["message"], payloads)
    except OSError as error:  # the other end went away mid-message
        raise EOFError(str(error)) from None
    except (ValueError, KeyError, TypeError, RecursionError, BufferTooShort, MemoryError) as error:
        if isinstance(error, CrossingError):
            raise
        raise CrossingError(f"a malformed message ({type(error).__name__}: {str(error)[:120]})") from None
    if not isinstance(message, dict):
        raise CrossingError("a message must be a mapping")
    return message
