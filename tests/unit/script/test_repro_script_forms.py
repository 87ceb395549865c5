"""Script forms of issue 12 (7): sizes read from a module-level configuration object
(a dataclass instance, a SimpleNamespace, a class of constants), and pytest-style test
files holding several definitions, each named after its function. Nothing is run."""

import numpy as np
import pytest
from script_helpers import HEADER, load, only

from fuser_core import FuserError

BODY = """
with FusionDefinition() as fd:
    t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
    fd.add_output(fd.ops.mul(t0, 2.0))
inputs = [torch.randn(B, S)]
fd.execute(inputs)
"""


def shape_of(script) -> tuple[int, ...]:
    ld = only(script)
    assert script.problems == [], [p.one_line() for p in script.problems]
    (out,) = ld.fd.execute(ld.materialize_inputs(seed=1))
    np.testing.assert_allclose(out, ld.materialize_inputs(seed=1)[0] * 2.0)
    return ld.inputs[0].shape


CONFIGS = {
    "dataclass": """
        from dataclasses import dataclass, field

        @dataclass
        class Config:
            batch: int = 4
            seq: int = 16
            extra: list = field(default_factory=list)
            hidden: int = field(default=8)

        CONFIG = Config(seq=7)
        B, S = CONFIG.batch, CONFIG.seq
        """,
    "frozen dataclass, positional": """
        import dataclasses

        @dataclasses.dataclass(frozen=True)
        class Config:
            batch: int
            seq: int = 16

        CONFIG = Config(4, 7)
        B, S = CONFIG.batch, CONFIG.seq
        """,
    "SimpleNamespace": """
        from types import SimpleNamespace
        CONFIG = SimpleNamespace(batch=4, seq=7)
        B, S = CONFIG.batch, CONFIG.seq
        """,
    "types.SimpleNamespace": """
        import types
        CONFIG = types.SimpleNamespace(batch=2, seq=1)
        CONFIG.batch = 4
        CONFIG.seq = CONFIG.seq + 6
        B, S = CONFIG.batch, CONFIG.seq
        """,
    "class of constants": """
        class CONFIG:
            BATCH = 4
            SEQ = BATCH + 3
        B, S = CONFIG.BATCH, CONFIG.SEQ
        """,
    "instance of a class of constants": """
        class Config:
            batch = 4
            seq = 7
        CONFIG = Config()
        B, S = CONFIG.batch, CONFIG.seq
        """,
    "class with __init__ and a property": """
        class Config:
            def __init__(self, batch, seq=3):
                self.batch = batch
                self.seq = seq

            @property
            def padded(self):
                return self.seq + 4

            def sizes(self):
                return self.batch, self.padded
        CONFIG = Config(4)
        B, S = CONFIG.sizes()
        """,
    "NamedTuple and inheritance": """
        from typing import NamedTuple

        class Base(NamedTuple):
            batch: int = 4

        class Config(Base):
            seq: int = 7
        CONFIG = Config()
        B, S = CONFIG.batch, CONFIG.seq
        """,
    "dataclasses.replace and a classmethod": """
        from dataclasses import dataclass, replace

        @dataclass
        class Config:
            batch: int = 1
            seq: int = 7

            @classmethod
            def small(cls):
                return cls(batch=2)
        CONFIG = replace(Config.small(), batch=4)
        B, S = CONFIG.batch, CONFIG.seq
        """,
}


@pytest.mark.parametrize("config", CONFIGS.values(), ids=CONFIGS.keys())
def test_sizes_from_a_module_level_configuration_object(config):
    assert shape_of(load(HEADER, config, BODY)) == (4, 7)


def test_sizes_read_inside_a_definition_function_from_the_configuration():
    script = load(
        HEADER,
        """
        from dataclasses import dataclass

        @dataclass
        class Cfg:
            n: int = 5
            scale: float = 0.5
        CFG = Cfg()

        def fusion(fd):
            t = fd.define_tensor(shape=[CFG.n], contiguity=[True])
            fd.add_output(fd.ops.mul(t, CFG.scale))

        with FusionDefinition() as fd:
            fusion(fd)
        fd.execute([torch.ones(CFG.n)])
        """,
    )
    ld = only(script)
    assert ld.name == "fusion" and ld.inputs[0].shape == (5,)
    np.testing.assert_array_equal(ld.fd.execute(ld.materialize_inputs())[0], np.full(5, 0.5, np.float32))


REFUSALS = {
    "missing field": ("@dataclass\nclass C:\n    n: int\nc = C()\n", 4, "C: missing field 'n'"),
    "unknown field": ("@dataclass\nclass C:\n    n: int = 1\nc = C(m=2)\n", 4, "unexpected keyword argument 'm'"),
    "frozen": ("@dataclass(frozen=True)\nclass C:\n    n: int = 1\nc = C()\nc.n = 2\n", 5, "frozen dataclass"),
    "no attribute": ("class C:\n    n = 1\nx = C.m\n", 3, "class C has no attribute 'm'"),
    "private": ("class C:\n    _n = 1\nx = C._n\n", 3, "private and special attributes are never read"),
    "no __init__": ("class C:\n    n = 1\nc = C(3)\n", 3, "C() takes no arguments"),
    "refused class body": ("class C:\n    import os\n    n = 1\n", 2, "import of `os` refused"),
    "dunder write": ("class C:\n    n = 1\nC.__class__ = 1\n", 3, "special attributes are never written"),
    "attribute of a list": ("x = [1]\nx.n = 2\n", 2, "assigning to an attribute of a list is not supported"),
}


@pytest.mark.parametrize("body,line,message", REFUSALS.values(), ids=REFUSALS.keys())
def test_configuration_refusals_name_their_line(body, line, message):
    text = HEADER + "from dataclasses import dataclass\n" + body + "B, S = 4, 7\n" + BODY
    script = load(text)
    assert only(script).inputs[0].shape == (4, 7)
    (problem,) = script.problems
    assert problem.location.lineno == line + 3 and message in problem.one_line(), problem.one_line()


def test_a_refused_class_body_statement_leaves_only_its_name_unavailable():
    script = load(
        HEADER,
        """
        class C:
            bad = open("x")
            good = 3
        B, S = C.good + 1, 7
        x = C.bad
        """,
        BODY,
    )
    assert only(script).inputs[0].shape == (4, 7)
    assert [p.location.lineno for p in script.problems] == [5, 8]
    assert "`bad` is not available" in script.problems[1].one_line()


PYTEST_FILE = """
import pytest
import torch
from nvfuser import FusionDefinition, DataType


@pytest.fixture
def length():
    yield 6


@pytest.fixture
def shape(length):
    return [2, length]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_exp(dtype, length):
    inputs = [torch.randn(length, dtype=dtype)]
    with FusionDefinition() as fd:
        t = fd.from_pytorch(inputs[0])
        fd.add_output(fd.ops.exp(t))
    fd.execute(inputs)


@pytest.mark.parametrize("n, scale", [pytest.param(3, 0.5, id="small"), (8, 2.0)])
def test_scale(n, scale):
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1], contiguity=[True])
        fd.add_output(fd.ops.mul(t, scale))
    fd.execute([torch.ones(n)])


def test_two_definitions(shape):
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.neg(fd.define_tensor(shape=[-1, -1], contiguity=[True, True])))
    fd.execute([torch.randn(shape)])
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.abs(fd.define_tensor(shape=[-1], contiguity=[True])))
    fd.execute([torch.randn(3)])


def make_sum():
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.sum(fd.define_tensor(shape=[-1, -1], contiguity=[True, True]), dims=[0]))
    return fd


def helper(x):
    with FusionDefinition() as fd:
        fd.add_output(fd.define_tensor(shape=[-1], contiguity=[True]))
    return fd


class TestOps:
    @pytest.mark.parametrize("k", [5])
    def test_relu(self, k):
        with FusionDefinition() as fd:
            fd.add_output(fd.ops.relu(fd.define_tensor(shape=[-1], contiguity=[True])))
        fd.execute([torch.randn(k)])
"""


def test_a_pytest_file_loads_each_definition_named_after_its_function():
    script = load(PYTEST_FILE)
    assert script.problems == [], [p.one_line() for p in script.problems]
    names = [d.name for d in script.definitions]
    assert names == [
        "test_exp",
        "test_scale",
        "test_two_definitions",
        "test_two_definitions#2",
        "make_sum",
        "TestOps.test_relu",
    ]  # helper(x) needs an argument nobody gives: not run
    by_name = {d.name: d for d in script.definitions}
    exp = by_name["test_exp"]
    assert exp.inputs[0].shape == (6,) and "bfloat" in exp.fd.fusion_ir()  # first case, fixture's yield
    assert by_name["test_scale"].inputs[0].shape == (3,)
    (scaled,) = by_name["test_scale"].fd.execute(by_name["test_scale"].materialize_inputs())
    np.testing.assert_array_equal(scaled, np.full(3, 0.5, np.float32))
    assert by_name["test_two_definitions"].inputs[0].shape == (2, 6)  # a fixture using a fixture
    assert by_name["test_two_definitions#2"].inputs[0].shape == (3,)
    assert by_name["make_sum"].inputs is None
    assert by_name["TestOps.test_relu"].inputs[0].shape == (5,)
    assert script.definition("test_two_definitions#2") is by_name["test_two_definitions#2"]


def test_parametrize_refusals_name_the_decorator_line():
    script = load(
        HEADER,
        """
        @pytest.mark.parametrize("a, b", [(1, 2, 3)])
        def test_bad(a, b):
            pass
        """,
        BODY.replace("B, S", "4, 7"),
    )
    (problem,) = script.problems
    assert problem.location.lineno == 4 and "a case has 3 values for 2 names" in problem.one_line()
    assert only(script).name == "fd"


def test_a_fixture_nobody_defines_is_still_unavailable_with_its_reason():
    script = load(HEADER, "def test_x(tmp_path):\n    n = tmp_path\n", BODY.replace("B, S", "4, 7"))
    assert "pytest fixture" in script.problems[0].one_line() and script.problems[0].location.lineno == 4


def test_a_with_block_in_a_function_is_named_after_the_function():
    script = load(
        HEADER,
        """
        def run():
            with FusionDefinition() as fd:
                fd.add_output(fd.ops.exp(fd.define_tensor([-1], [True])))
            fd.execute([torch.randn(2)])
        run()
        with FusionDefinition() as fd:
            fd.add_output(fd.ops.exp(fd.define_tensor([-1], [True])))
        with FusionDefinition() as fd:
            fd.add_output(fd.ops.exp(fd.define_tensor([-1], [True])))
        """,
    )
    assert [d.name for d in script.definitions] == ["run", "fd", "fd#2"]


def test_a_missing_definition_name_lists_the_unique_names():
    script = load(HEADER, "def test_a():\n" + "\n".join("    " + ln for ln in BODY.strip().split("\n")) + "\n")
    with pytest.raises(FuserError, match=r"has no definition 'x'; it has \['test_a'\]"):
        script.definition("x")
