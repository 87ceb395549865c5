"""load_repro refuses what is outside the subset: nothing in a script ever runs, and only FuserError escapes."""

import ast
import pathlib
import textwrap

import pytest
from script_helpers import DEFINITION, HEADER, load, only

import fuser_core.script as script_pkg
from fuser_core import FuserError, load_repro
from fuser_core.script.expressions import MAX_STEPS, MAX_WORK


def simple(body: str) -> str:
    indented = textwrap.indent(textwrap.dedent(body), "    ")
    return f"{HEADER}with FusionDefinition() as fd:\n{indented}\n"


# -- refusals that do not stop loading ---------------------------------------------------------------
def test_timing_and_printing_code_after_execute_is_refused_but_the_definition_loads():
    script = load(
        HEADER,
        DEFINITION,
        """
        import time
        inputs = [torch.randn(2, 2), 1.0]
        for _ in range(5):
            out = fd.execute(inputs)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = fd.execute(inputs)
        print(f"took {time.perf_counter() - t0:.3f} s", out[0].shape)
        torch.testing.assert_close(out[0], inputs[0] * inputs[1])
        elapsed = time.perf_counter() - t0
        """,
    )
    assert only(script).inputs[0].shape == (2, 2)
    lines = [p.location.lineno for p in script.problems]
    assert lines == [9, 14, 18]
    assert "`time` is not available" in script.problems[1].one_line()


def test_refused_definition_alongside_a_good_one_is_a_problem():
    script = load(
        HEADER,
        """
        with FusionDefinition() as good:
            good.add_output(good.ops.exp(good.define_tensor([-1], [True])))
        with FusionDefinition() as bad:
            t = bad.define_tensor([-1], [True])
            bad.add_output(bad.ops.grouped_mm(t))
        """,
    )
    assert [d.name for d in script.definitions] == ["good"]
    assert [p.one_line() for p in script.problems] == ["<repro>:8: grouped_mm: is not supported by fuser-workbench yet"]


def test_name_of_a_refused_assignment_says_why_when_used():
    script = load(HEADER + DEFINITION + "import numpy as np\nx = np.ones(3)\ninputs = [x]\n")
    assert [p.location.lineno for p in script.problems] == [8, 9, 10]
    assert "`x` is not available: its assignment at line 9 was refused" in script.problems[2].one_line()


# -- malformed scripts ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "lineno", "message"),
    [
        ("import torch\nwith FusionDefinition() as fd\n    pass\n", 2, "syntax error"),
        ("import torch\nx = [1, 2\n", 2, "syntax error"),
        ("def f(fd):\n  t = 1\n    u = 2\n", 3, "syntax error: unexpected indent"),
        ("if True:\n\tx = 1\n        y = 2\n", 3, "syntax error"),
    ],
)
def test_syntax_errors_are_fuser_errors_naming_the_line(text, lineno, message):
    with pytest.raises(FuserError, match=message) as info:
        load_repro(text)
    assert info.value.location.lineno == lineno


def test_a_script_without_definitions_is_a_fuser_error():
    with pytest.raises(FuserError, match="has no fusion definition"):
        load_repro(HEADER + "inputs = [torch.randn(2)]\n")


def test_not_utf8_file_is_a_fuser_error(tmp_path):
    path = tmp_path / "latin1.py"
    path.write_bytes("# Gr\xf6\xdfe\n".encode("latin-1"))
    with pytest.raises(FuserError, match="not UTF-8"):
        load_repro(path)


ODD_SCRIPTS = [
    "",
    "\x00",
    "(" * 300 + ")" * 300,
    "x = " + "1 + " * 3000 + "1\n",
    HEADER + "with FusionDefinition() as fd:\n    fd.add_output(fd.define_tensor([-1], [True]))\n    return 3\n",
    HEADER + "def f(fd):\n    f(fd)\nwith FusionDefinition() as fd:\n    f(fd)\n",
    HEADER + "with FusionDefinition() as fd:\n    with FusionDefinition() as fd2:\n        pass\n",
    HEADER + "with FusionDefinition() as fd:\n    fd.define_tensor(shape=range(10**9))\n",
    HEADER + "with FusionDefinition() as fd:\n    fd.define_vector(10**9)\n",
    HEADER + "with FusionDefinition() as fd:\n    x = 2 ** 10 ** 10\n",
    HEADER + "with FusionDefinition() as fd:\n    x = [0] * 10 ** 10\n",
    HEADER + "with FusionDefinition() as fd:\n    x = torch.tensor([[0.0] * 100000] * 100000)\n",
    HEADER + "with FusionDefinition() as fd:\n    a, b = fd.define_tensor([-1], [True])\n",
    HEADER + "with FusionDefinition() as fd:\n    fd.ops.add(*5)\n",
    HEADER + "with FusionDefinition() as fd:\n    x = {}\n",
    HEADER + "with FusionDefinition() as fd:\n    x = [1][5]\n",
    HEADER + "with FusionDefinition() as fd:\n    x = 1 / 0\n",
    HEADER + "with FusionDefinition() as fd:\n    t = fd.define_tensor([-1], [True])\n    if t:\n        pass\n",
    HEADER + "with FusionDefinition() as fd:\n    t = torch.randn(3).as_strided((4,), (1,))\n",
    HEADER + "with FusionDefinition() as fd:\n    fd.add_output(fd.define_tensor([-1], [True], dtype='bogus'))\n",
    HEADER + "with FusionDefinition() as fd:\n    fd.add_output(fd.define_tensor([-1], [True]), [2, 2])\n",
    HEADER
    + "with FusionDefinition() as fd:\n    fd.add_output(fd.ops.reshape(fd.define_tensor([2, 3], [True, True]), [7]))",
    HEADER + "with FusionDefinition() as fd:\n    x = torch.randn(2, 3).expand(4, 4)\n",
    HEADER + "with FusionDefinition() as fd:\n    x = torch.randn(2) + 1\n",
    HEADER + "with FusionDefinition() as fd:\n    x = f'{1:>{10**9}}'\n    y = 'a' * 10**9\n",
    HEADER + "async def f():\n    pass\nwith FusionDefinition() as fd:\n    pass\n",
]


@pytest.mark.parametrize("text", ODD_SCRIPTS)
def test_python_exceptions_never_escape_load_repro(text):
    try:
        load_repro(text)
    except FuserError as err:
        assert err.one_line() and "\n" not in err.one_line()


def test_a_huge_loop_in_a_definition_stops_at_the_step_budget():
    with pytest.raises(FuserError, match=f"more than {MAX_STEPS} steps") as info:
        load(simple("t = fd.define_tensor([-1], [True])\nfor i in range(10**9):\n    t = t"))
    assert info.value.location.lineno in (5, 6)


@pytest.mark.parametrize(
    "body",
    [
        "a = [0] * 100000\nfor i in range(10**6):\n    b = a == a",
        "for i in range(10**6):\n    x = list(range(100000))",
        "a = [[0.0] * 1000] * 1000\nfor i in range(10**6):\n    x = torch.tensor(a)",
        "a = [0] * 100000\nfor i in range(10**6):\n    b = a[:]",
    ],
)
def test_list_work_inside_a_definition_is_bounded(body):
    with pytest.raises(FuserError, match=f"more than {MAX_WORK} list items"):
        load_repro(simple(body))


def test_deep_nesting_is_a_one_line_problem():
    script = load(HEADER, "x = " + "-" * 900 + "1\n", DEFINITION)
    assert [p.one_line() for p in script.problems] == ["<repro>:3: the script nests too deeply to be interpreted"]


# -- security: nothing in a script runs ---------------------------------------------------------------
def marker(tmp_path: pathlib.Path) -> tuple[pathlib.Path, str]:
    path = tmp_path / "pwned"
    return path, repr(str(path))


def test_os_system_at_top_level_is_refused_and_runs_nothing(tmp_path):
    path, name = marker(tmp_path)
    script = load(HEADER + f"import os\nos.system('touch ' + {name})\n" + DEFINITION)
    assert not path.exists()
    assert [p.location.lineno for p in script.problems] == [3, 4]
    assert "os.system" in str(script.problems[1]) and only(script).name == "fd"


def test_os_system_inside_the_with_block_fails_the_definition_and_runs_nothing(tmp_path):
    path, name = marker(tmp_path)
    with pytest.raises(FuserError, match="`os` is not available") as info:
        load(HEADER + f"import os\nwith FusionDefinition() as fd:\n    os.system('touch ' + {name})\n")
    assert info.value.location.lineno == 5 and not path.exists()


@pytest.mark.parametrize(
    "attack",
    [
        "__import__('os').system('touch ' + {name})",
        "open({name}, 'w').write('x')",
        "exec('open(' + repr({name}) + ', \"w\")')",
        "eval('__import__(\"os\").system(\"touch \" + ' + repr({name}) + ')')",
        "getattr(__import__('os'), 'system')('touch ' + {name})",
        "compile('x', 'f', 'exec')",
        "x = [c for c in ().__class__.__base__.__subclasses__()]",
        "fd.ops.__class__.__init__.__globals__['os'].system('touch ' + {name})",
        "fd.__dict__",
        "fd.ops._val",
        "fd.fusion",
        "torch.load({name})",
        "torch.ops.load_library({name})",
        "f = lambda: __import__('os').system('touch ' + {name})",
        "import subprocess; subprocess.run(['touch', {name}])",
        "from os import system; system('touch ' + {name})",
        "import importlib; importlib.import_module('os').system('touch ' + {name})",
        "breakpoint()",
        "globals()['__builtins__']",
        "type('X', (), {{}})",
        "[].__class__",
        "(1).real",
    ],
)
def test_escapes_are_refused_at_top_level_and_inside_definitions(tmp_path, attack):
    path, name = marker(tmp_path)
    code = attack.format(name=name)
    script = load(HEADER + DEFINITION + code + "\n")
    assert script.problems and not path.exists()
    assert script.problems[0].location.lineno == 8
    inside = (
        HEADER + "with FusionDefinition() as fd:\n    " + code + "\n    fd.add_output(fd.define_tensor([-1], [True]))\n"
    )
    with pytest.raises(FuserError) as info:
        load_repro(inside)
    assert info.value.location.lineno == 4 and not path.exists()


def test_a_class_with_a_malicious_del_is_never_instantiated(tmp_path):
    path, name = marker(tmp_path)
    script = load(
        HEADER,
        f"""
        class Evil:
            def __del__(self):
                import os
                os.system('touch ' + {name})

            def __init__(self):
                import os
                os.system('touch ' + {name})
        e = Evil()
        """,
        DEFINITION,
    )
    assert not path.exists()
    # __init__ is interpreted like any script function (never __del__): its refusals name their lines
    lines = [(p.location.lineno, p.one_line()) for p in script.problems]
    assert [n for n, _ in lines] == [10, 11]
    assert "import of `os` refused" in lines[0][1] and "`os` is not available" in lines[1][1]


def test_decorators_and_default_values_of_functions_are_never_run(tmp_path):
    path, name = marker(tmp_path)
    load(
        HEADER,
        f"""
        import os
        @os.system('touch ' + {name})
        def decorated(fd, x=os.system('touch ' + {name})):
            pass

        def helper(x=print(os.system('touch ' + {name}))):
            pass
        """,
        DEFINITION,
    )
    assert not path.exists()


def test_loader_source_never_uses_exec_eval_or_import_at_run_time():
    root = pathlib.Path(script_pkg.__file__).parent
    modules = sorted(path.stem for path in root.glob("*.py"))
    assert {"loader", "interpreter", "expressions", "torch_subset"} <= set(modules)
    for module in modules:
        tree = ast.parse((root / f"{module}.py").read_text())
        calls = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        assert not calls & {"exec", "eval", "compile", "__import__"}, module


@pytest.mark.parametrize("statement", ["break", "continue", "return 1"])
def test_control_flow_outside_loops_is_a_problem(statement):
    script = load(HEADER, f"def test_x():\n    {statement}\n{statement}\n", DEFINITION)
    assert only(script).name == "fd"
    expected = {5} if statement.startswith("return") else {4, 5}
    assert {p.location.lineno for p in script.problems} == expected
