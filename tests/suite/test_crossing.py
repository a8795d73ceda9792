"""What crosses between the suite and a kernel's process (harness/guard/crossing.py): tensors with their whole storage and
view, plain data and the suite's records, and nothing else: no class the sender names, no subclass, no attribute."""

import json
import socket
from multiprocessing.connection import Connection

import pytest
import torch

from harness.guard.crossing import CrossingError, receive, send
from oracles.profiles import TORCH_CPU
from oracles.bounds import PrecisionProfile, Reduction
from specs.registry import Capabilities


@pytest.fixture
def pipe():
    a, b = socket.socketpair()
    ends = Connection(a.detach()), Connection(b.detach())
    yield ends
    for end in ends:
        end.close()


def test_a_strided_view_crosses_with_its_whole_storage_and_the_records_as_themselves(pipe):
    base = torch.arange(24, dtype=torch.float32)
    view = base.as_strided((3, 4), (1, 6), 2)  # transposed, with an offset
    capabilities = Capabilities(dtypes=frozenset({torch.float16}), max_row_length={"cpu": 64}, promises=frozenset())
    profile = PrecisionProfile(TORCH_CPU, Reduction("sequential"))
    send(pipe[0], {"x": view, "args": (1, None), "capabilities": capabilities, "profile": profile, "dtype": torch.bfloat16})
    got = receive(pipe[1], "cpu")
    x = got["x"]
    assert (x.shape, x.stride(), x.storage_offset()) == (view.shape, view.stride(), 2) and torch.equal(x, view)
    assert x.untyped_storage().nbytes() == base.untyped_storage().nbytes()
    assert x.untyped_storage().data_ptr() != base.untyped_storage().data_ptr()  # its own
    assert got["args"] == (1, None) and got["capabilities"] == capabilities and got["profile"] == profile
    assert got["dtype"] is torch.bfloat16


class Marked(torch.Tensor):
    pass


@pytest.mark.parametrize("made, said", [
    (lambda: torch.ones(2).as_subclass(Marked), "a tensor subclass (Marked) cannot cross"),
    (lambda: setattr(t := torch.ones(2), "detach", lambda: t) or t, "a tensor carrying attributes (detach) cannot cross"),
    (lambda: object(), "a object cannot cross"),
])
def test_a_subclass_an_attribute_or_an_object_does_not_cross(pipe, made, said):
    with pytest.raises(CrossingError, match=said.replace("(", r"\(").replace(")", r"\)")):
        send(pipe[0], {"y": made()})


@pytest.mark.parametrize("header", [
    {"message": {"record": "Popen", "fields": {}}, "tensors": []},  # a class the suite does not list
    {"message": {"dtype": "object"}, "tensors": []},
    {"message": {"map": [[{"tensor": 3}, 1]]}, "tensors": []},  # a tensor that was not sent
    {"message": {"record": "Capabilities", "fields": {"promises": {"frozenset": ["faster"]}}}, "tensors": []},
    {"message": json.loads("[" * 10 + "]" * 10), "tensors": []},  # not a mapping
])
def test_a_message_naming_what_cannot_cross_is_refused(pipe, header):
    pipe[0].send_bytes(json.dumps(header).encode())
    with pytest.raises(CrossingError):
        receive(pipe[1], "cpu")


def test_a_message_nested_past_any_depth_is_refused_not_a_crash(pipe):
    pipe[0].send_bytes(b'{"message": ' + b"[" * 100_000 + b"]" * 100_000 + b', "tensors": []}')
    with pytest.raises(CrossingError):
        receive(pipe[1], "cpu")


def test_a_tensor_on_another_backend_or_with_a_view_past_its_storage_is_refused(pipe):
    meta = {"dtype": "float32", "shape": [4], "stride": [1], "offset": 0, "bytes": 8, "device": "cpu"}
    for bad in ({**meta, "device": "cuda:0"}, meta):  # a device of another backend; 4 floats in 8 bytes
        pipe[0].send_bytes(json.dumps({"message": {"map": [["y", {"tensor": 0}]]}, "tensors": [bad]}).encode())
        pipe[0].send_bytes(bytes(8))
        with pytest.raises(CrossingError):
            receive(pipe[1], "npu")


def test_an_answer_holding_more_bytes_than_it_may_is_refused_before_they_are_read(pipe):
    meta = {"dtype": "float32", "shape": [1], "stride": [1], "offset": 0, "bytes": 1 << 40, "device": "cpu"}
    pipe[0].send_bytes(json.dumps({"message": {"map": [["y", {"tensor": 0}]]}, "tensors": [meta]}).encode())
    with pytest.raises(CrossingError, match="more than the 4096 an answer may hold"):
        receive(pipe[1], "cpu", max_bytes=4096)
