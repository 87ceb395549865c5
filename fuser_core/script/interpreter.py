"""Statements of a repro script, interpreted from its AST, and the definitions they make.

Every `with FusionDefinition() as fd:` block (and every `self.exec_nvfuser(func, ...)`
of nvFuser's tests) runs our real FusionDefinition on the script's behalf and becomes
a `DefinitionRecord`; `fd.execute([...])` records that definition's inputs. Outside a
definition, a refused statement is recorded as a problem and loading goes on; inside
one, it fails that definition.

Loops outside a definition run their body once: there they repeat an execution for
timing, and once is enough to see which definition and inputs they use. A script that
exceeds the loader's step or work limit stops loading where it does (`limit_error`).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fuser_core.errors import FuserError, at_location
from fuser_core.frontend.fusion_definition import FusionDefinition
from fuser_core.script.expressions import (
    LoadLimitExceeded,
    Scope,
    ScriptExpressions,
    ScriptFunction,
    refusal,
    source_text,
)
from fuser_core.script.frontend_access import kind_of
from fuser_core.script.input_spec import InputSpec, ScalarSpec, TensorSpec
from fuser_core.script.objects import (
    MISSING,
    NAMED_TUPLE,
    DataclassOptions,
    FieldSpec,
    ParamCase,
    ScriptClass,
    ScriptObject,
    decorator_name,
    has_decorator,
)
from fuser_core.script.safe_builtins import BUILTINS, MODULES
from fuser_core.script.values import Ignored, Opaque, PassContext, SafeFunction, Unavailable

MAX_CALL_DEPTH = 32
MAX_FIXTURE_DEPTH = 8  # fixtures asking for fixtures
INPUT_NAMES = ("inputs", "ins")
EXECUTE_METHODS = ("execute", "validate")


@dataclass(eq=False)
class DefinitionRecord:
    """One FusionDefinition the script made: complete, or failed with `error`."""

    name: str
    lineno: int
    fd: FusionDefinition
    inputs: list[InputSpec] | None = None
    error: FuserError | None = None
    named_by_call: bool = False
    frame: int = 0  # the function call it was made in (0: the module), for pairing `inputs`


class SelfOfTest:
    """`self` in a test method: only exec_nvfuser and (ignored) assertions."""


class _Signal(BaseException):  # BaseException: no `except Exception` of ours may catch it
    """return / break / continue inside the interpreted code."""

    keyword = ""


class _Return(_Signal):
    keyword = "return"

    def __init__(self, value: Any) -> None:
        self.value = value


class _Break(_Signal):
    keyword = "break"


class _Continue(_Signal):
    keyword = "continue"


def as_fuser_error(err: Exception) -> FuserError:
    if isinstance(err, FuserError):
        return err
    if isinstance(err, RecursionError):
        error = FuserError("the script nests too deeply to be interpreted")
    else:
        error = FuserError(f"{type(err).__name__}: {err}")
    error.__cause__ = err
    return error


def to_input_specs(value: Any, op: str) -> list[InputSpec]:
    """A script's input list as specs: torch-made tensors, Python numbers, and lists of
    ints for vector inputs."""
    if not isinstance(value, (list, tuple)):
        raise FuserError(f"inputs must be a list, got a {kind_of(value)}", op=op)
    specs: list[InputSpec] = []
    for index, item in enumerate(value):
        if isinstance(item, (TensorSpec, ScalarSpec)):
            specs.append(item)
        elif isinstance(item, (bool, int, float, complex)):
            specs.append(ScalarSpec(item))
        elif isinstance(item, (list, tuple)) and all(type(v) is int for v in item):
            # a vector input (`define_vector(n)`), given as n ints: one scalar input each
            specs.extend(ScalarSpec(v) for v in item)
        else:
            raise FuserError(f"input {index} is a {kind_of(item)}, not a torch tensor or a Python number", op=op)
    return specs


def takes_fd(node: ast.FunctionDef) -> bool:
    """`def anything(fd: FusionDefinition)`: a definition function."""
    args = node.args
    params = [*args.posonlyargs, *args.args]
    if len(params) != 1 or args.kwonlyargs or args.vararg or args.kwarg:
        return False
    annotation = params[0].annotation
    name = annotation.id if isinstance(annotation, ast.Name) else ""
    name = annotation.attr if isinstance(annotation, ast.Attribute) else name
    return params[0].arg == "fd" or name.endswith("FusionDefinition")


class ReproInterpreter(ScriptExpressions):
    def __init__(self, filename: str, lines: list[str]) -> None:
        super().__init__(filename, lines)
        self.module = Scope({}, Scope(dict(BUILTINS)))
        self.records: list[DefinitionRecord] = []
        self.problems: list[FuserError] = []
        self.input_assignments: list[tuple[int, Any, int]] = []  # line, value, frame
        self.limit_error: LoadLimitExceeded | None = None  # why loading stopped early
        self._defining: list[DefinitionRecord] = []
        self._tests: list[str] = []
        self._functions: list[str] = []  # script functions running, innermost last
        self._frames = [0]  # their calls, numbered in order (0: the module)
        self._calls_made = 0
        self._call_depth = 0  # script functions (and tests) running
        self._loop_depths = [0]  # loops under way in each running function, the module first

    # -- the module -----------------------------------------------------------------------
    def run(self, tree: ast.Module) -> None:
        """The module body, then what pytest would run and definition functions nothing
        calls; a step or work limit stops it all and is kept in `limit_error`."""
        try:
            self._run_module(tree)
        except LoadLimitExceeded as err:
            self.limit_error = err

    def _run_module(self, tree: ast.Module) -> None:
        self.exec_block(tree.body, self.module)
        referenced = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name not in referenced:
                if has_decorator(node, "fixture"):
                    continue  # run only when a test asks for it
                if node.name.startswith("test"):
                    self._run_test(node, node.name, None)
                elif takes_fd(node):
                    self._run_uncalled(node)
                elif _makes_definition(node) and _needs_no_arguments(node):
                    self._run_test(node, node.name, None, is_test=False)
            elif isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and item.name.startswith("test"):
                        self._run_test(item, f"{node.name}.{item.name}", SelfOfTest())

    def _run_test(self, node: ast.FunctionDef, name: str, self_value: SelfOfTest | None, is_test: bool = True) -> None:
        """A test pytest would run (or a function nobody calls that makes a definition):
        its definitions are named after it."""
        scope = self.module.child()
        if is_test:
            self._tests.append(name)
        with at_location(self.location(node.lineno)):
            try:
                self._bind_unknown(node, scope, self_value)
                self._run_body(ScriptFunction(node, self.module), scope)
            except LoadLimitExceeded:
                raise
            except Exception as err:  # what the body's statements did not already keep
                self.problems.append(as_fuser_error(err))
            finally:
                if is_test:
                    self._tests.pop()

    def _bind_unknown(
        self, node: ast.FunctionDef, scope: Scope, self_value: SelfOfTest | None, fixture_depth: int = 0
    ) -> None:
        """Parameters of a test nobody calls: `self`, the first case of its
        `pytest.mark.parametrize`, defaults, fixtures of this file, else unavailable."""
        args = node.args
        params = [*args.posonlyargs, *args.args]
        defaults = dict(zip([p.arg for p in params][len(params) - len(args.defaults) :], args.defaults, strict=True))
        defaults |= {p.arg: d for p, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None}
        cases = self._first_cases(node)
        for index, param in enumerate([*params, *args.kwonlyargs]):
            if index == 0 and self_value is not None:
                scope.names[param.arg] = self_value
            elif param.arg in cases:
                scope.names[param.arg] = cases[param.arg]
            elif param.arg in defaults:
                scope.names[param.arg] = self.eval(defaults[param.arg], self.module)
            else:
                scope.names[param.arg] = self._fixture(param.arg, fixture_depth)
        for extra in (args.vararg, args.kwarg):
            if extra is not None:
                scope.names[extra.arg] = () if extra is args.vararg else {}

    def _first_cases(self, node: ast.FunctionDef) -> dict[str, Any]:
        """Each `@pytest.mark.parametrize(names, values)` of the test: its first case."""
        bound: dict[str, Any] = {}
        for decorator in node.decorator_list:
            if not (isinstance(decorator, ast.Call) and decorator_name(decorator).endswith("mark.parametrize")):
                continue
            with self.at_line(decorator.lineno):
                given = dict(zip(("argnames", "argvalues"), decorator.args, strict=False))
                given |= {k.arg: k.value for k in decorator.keywords if k.arg in ("argnames", "argvalues", "indirect")}
                if "indirect" in given or "argnames" not in given or "argvalues" not in given:
                    continue
                names = self.eval(given["argnames"], self.module)
                values = self.eval(given["argvalues"], self.module)
                bound |= _first_case(names, values)
        return bound

    def _fixture(self, name: str, depth: int) -> Any:
        """A fixture of this file, run as pytest would (up to its `yield`); else the
        parameter is unavailable and using it fails with why."""
        found, fn = self.module.find(name)
        if not (found and isinstance(fn, ScriptFunction) and has_decorator(fn.node, "fixture")):
            reason = "it is a pytest fixture or parameter, which a loaded script has no value for"
            return Unavailable(name, reason)
        if depth >= MAX_FIXTURE_DEPTH:
            raise FuserError(f"fixtures nest more than {MAX_FIXTURE_DEPTH} deep", op=name)
        scope = fn.closure.child()
        self._bind_unknown(fn.node, scope, None, depth + 1)
        body = fn.node.body
        stop = next((i for i, s in enumerate(body) if isinstance(s, ast.Expr) and isinstance(s.value, ast.Yield)), None)
        if stop is None:
            return self._run_body(fn, scope)
        self._run_statements(body[:stop], scope, fn.name)
        yielded: ast.Yield = body[stop].value  # type: ignore[attr-defined]
        with self.at_line(yielded.lineno):
            return None if yielded.value is None else self.eval(yielded.value, scope)

    def _run_uncalled(self, node: ast.FunctionDef) -> None:
        found, value = self.module.find(node.name)
        fn = value if found and isinstance(value, ScriptFunction) else ScriptFunction(node, self.module)
        fd = FusionDefinition()
        with at_location(self.location(node.lineno)):
            self.define(fd, lambda: self.call_script(fn, [fd], {}), node.name, node.lineno)

    # -- definitions ------------------------------------------------------------------------
    def define(self, fd: FusionDefinition, body: Callable[[], Any], name: str, lineno: int) -> DefinitionRecord:
        """Run `body` inside `fd`'s with-block; a failure is kept on the record."""
        if self._defining:
            raise FuserError("a FusionDefinition cannot be made inside another one")
        record = DefinitionRecord(self._tests[-1] if self._tests else name, lineno, fd, frame=self._frames[-1])
        record.named_by_call = bool(self._tests)
        self.records.append(record)
        self._defining.append(record)
        try:
            _inside(fd, body)
        except LoadLimitExceeded as err:
            record.error = err
            raise
        except FuserError as err:
            record.error = err
        except Exception as err:
            record.error = as_fuser_error(err)
        finally:
            self._defining.pop()
        return record

    def record_of(self, fd: FusionDefinition) -> DefinitionRecord | None:
        return next((r for r in reversed(self.records) if r.fd is fd), None)

    def intercept_method(self, owner: Any, name: str, node: ast.Call, scope: Scope) -> tuple[bool, Any]:
        if isinstance(owner, FusionDefinition) and name in EXECUTE_METHODS:
            return True, self._execute(owner, name, node, scope)
        if isinstance(owner, SelfOfTest) and name == "exec_nvfuser":
            return True, self._exec_nvfuser(node, scope)
        return False, None

    def extra_attribute(self, owner: Any, name: str) -> Any:
        if isinstance(owner, SelfOfTest) and (name.startswith("assert") or name == "skipTest"):
            return Ignored(f"self.{name}")
        return super().extra_attribute(owner, name)

    def _execute(self, fd: FusionDefinition, name: str, node: ast.Call, scope: Scope) -> Opaque:
        record = self.record_of(fd)
        if record is not None and record in self._defining:
            raise FuserError(f"{name}() needs a complete definition: call it after the `with` block", op=name)
        arg = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "inputs"), None)
        if arg is None:
            raise FuserError("needs a list of inputs", op=name)
        if not (isinstance(arg, ast.Name) and arg.id in INPUT_NAMES and not scope.find(arg.id)[0]):
            specs = to_input_specs(self.eval(arg, scope), name)
            if record is not None and record.inputs is None:
                record.inputs = specs
        # else: `inputs` is assigned later in the file; the loader pairs them afterwards
        return Opaque(f"the result of fd.{name}")

    def _exec_nvfuser(self, node: ast.Call, scope: Scope) -> tuple[Any, ...]:
        """nvFuser's test helper: define with `fusion_func`, then run on `inputs`."""
        args, kwargs = self.arguments(node, scope)
        fusion_func = args[0] if args else kwargs.get("fusion_func")
        inputs = args[1] if len(args) > 1 else kwargs.get("inputs")
        if not isinstance(fusion_func, ScriptFunction):
            raise FuserError("needs the script's definition function as its first argument", op="exec_nvfuser")
        fd = FusionDefinition()
        record = self.define(fd, lambda: self.call_script(fusion_func, [fd], {}), fusion_func.name, node.lineno)
        record.inputs = to_input_specs(inputs, "exec_nvfuser")
        return Opaque("the result of exec_nvfuser"), fd

    # -- functions ----------------------------------------------------------------------------
    def call_script(self, fn: ScriptFunction, args: list[Any], kwargs: dict[str, Any]) -> Any:
        if self._call_depth >= MAX_CALL_DEPTH:
            raise FuserError(f"functions nest more than {MAX_CALL_DEPTH} calls deep", op=fn.name)
        scope = fn.closure.child()
        self._bind(fn, args, kwargs, scope)
        current = self._defining[-1] if self._defining else None
        if current is not None and not current.named_by_call and any(a is current.fd for a in args):
            current.name, current.named_by_call = fn.name, True
        return self._run_body(fn, scope)

    def _run_body(self, fn: ScriptFunction, scope: Scope) -> Any:
        return self._run_statements(fn.node.body, scope, fn.name)

    def _run_statements(self, body: list[ast.stmt], scope: Scope, name: str) -> Any:
        self._call_depth += 1
        self._loop_depths.append(0)
        self._functions.append(name)
        self._calls_made += 1
        self._frames.append(self._calls_made)
        try:
            self.exec_block(body, scope)
        except _Return as ret:
            return ret.value
        finally:
            self._frames.pop()
            self._functions.pop()
            self._loop_depths.pop()
            self._call_depth -= 1
        return None

    def instantiate(self, cls: ScriptClass, args: list[Any], kwargs: dict[str, Any]) -> ScriptObject:
        """`Config(...)`: a dataclass's fields from the arguments and defaults, else the
        class's own `__init__` interpreted; `__post_init__` runs after the fields."""
        obj = ScriptObject(cls, {})
        if cls.is_dataclass:
            obj.attrs.update(_field_values(cls, args, kwargs))
            found, post_init = cls.lookup("__post_init__")
            if found and isinstance(post_init, ScriptFunction):
                self.call_script(post_init, [obj], {})
            return obj
        found, init = cls.lookup("__init__")
        if found and isinstance(init, ScriptFunction):
            self.call_script(init, [obj, *args], kwargs)
        elif args or kwargs:
            raise FuserError(f"{cls.name}() takes no arguments (it has no __init__ and is not a dataclass)")
        return obj

    def _bind(self, fn: ScriptFunction, args: list[Any], kwargs: dict[str, Any], scope: Scope) -> None:
        spec, name = fn.node.args, fn.name
        params = [p.arg for p in [*spec.posonlyargs, *spec.args]]
        if len(args) > len(params) and spec.vararg is None:
            raise FuserError(f"takes {len(params)} positional arguments but {len(args)} were given", op=name)
        bound: dict[str, Any] = dict(zip(params, args, strict=False))
        extra: dict[str, Any] = {}
        keyword_names = {p.arg for p in [*spec.args, *spec.kwonlyargs]}
        for key, value in kwargs.items():
            if key in bound:
                raise FuserError(f"got multiple values for argument {key!r}", op=name)
            if key not in keyword_names and spec.kwarg is None:
                raise FuserError(f"got an unexpected keyword argument {key!r}", op=name)
            (bound if key in keyword_names else extra)[key] = value
        defaults = dict(zip(params[len(params) - len(spec.defaults) :], spec.defaults, strict=True))
        defaults |= {p.arg: d for p, d in zip(spec.kwonlyargs, spec.kw_defaults, strict=True) if d is not None}
        for param in [*params, *(p.arg for p in spec.kwonlyargs)]:
            if param not in bound:
                if param not in defaults:
                    raise FuserError(f"missing argument {param!r}", op=name)
                bound[param] = self.eval(defaults[param], fn.closure)
        if spec.vararg is not None:
            bound[spec.vararg.arg] = tuple(args[len(params) :])
        if spec.kwarg is not None:
            bound[spec.kwarg.arg] = extra
        scope.names.update(bound)

    # -- statements -----------------------------------------------------------------------------
    def exec_block(self, body: list[ast.stmt], scope: Scope) -> None:
        for stmt in body:
            self.exec_statement(stmt, scope)

    def exec_statement(self, stmt: ast.stmt, scope: Scope) -> None:
        with at_location(self.location(stmt.lineno)):
            try:
                self.step()
                handler = getattr(self, f"_exec_{type(stmt).__name__}", None)
                if handler is None:
                    raise refusal(stmt)
                handler(stmt, scope)
            except _Signal as signal:
                if self._has_target(signal):
                    raise
                self._failed(stmt, scope, FuserError(f"`{signal.keyword}` outside a function or loop"), signal)
            except LoadLimitExceeded:
                raise  # every later statement would fail the same way
            except Exception as err:
                self._failed(stmt, scope, as_fuser_error(err), err)

    def _has_target(self, signal: _Signal) -> bool:
        return self._call_depth > 0 if isinstance(signal, _Return) else self._loop_depths[-1] > 0

    def _failed(self, stmt: ast.stmt, scope: Scope, error: FuserError, cause: BaseException) -> None:
        """Inside a definition the error fails it; elsewhere the statement is skipped."""
        if self._defining:
            if error is cause:
                raise error
            raise error from cause
        self._refuse(stmt, scope, error)

    def _refuse(self, stmt: ast.stmt, scope: Scope, error: FuserError) -> None:
        """Outside definitions a refused statement is skipped; names it would bind say why."""
        self.problems.append(error)
        targets = stmt.targets if isinstance(stmt, ast.Assign) else []
        if isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
            targets = [stmt.target]
        for target in targets:
            for node in ast.walk(target):
                if isinstance(node, ast.Name):
                    scope.names[node.id] = Unavailable(node.id, f"its assignment at line {stmt.lineno} was refused")

    def _exec_Expr(self, stmt: ast.Expr, scope: Scope) -> None:
        if not isinstance(stmt.value, ast.Constant):  # docstrings
            self.eval(stmt.value, scope)

    def _exec_Assign(self, stmt: ast.Assign, scope: Scope) -> None:
        value = self.eval(stmt.value, scope)
        for target in stmt.targets:
            self._assign_and_note(target, value, scope, stmt.lineno)

    def _exec_AnnAssign(self, stmt: ast.AnnAssign, scope: Scope) -> None:
        if stmt.value is not None:
            self._assign_and_note(stmt.target, self.eval(stmt.value, scope), scope, stmt.lineno)

    def _assign_and_note(self, target: ast.expr, value: Any, scope: Scope, lineno: int) -> None:
        self.assign(target, value, scope)
        if isinstance(target, ast.Name) and target.id in INPUT_NAMES:
            self.input_assignments.append((lineno, value, self._frames[-1]))

    def _exec_AugAssign(self, stmt: ast.AugAssign, scope: Scope) -> None:
        if not isinstance(stmt.target, ast.Name):
            raise FuserError(f"`{source_text(stmt)}`: augmented assignment is only supported on names")
        current = self.eval(ast.Name(stmt.target.id, ast.Load()), scope)
        self.assign(stmt.target, self.binary(type(stmt.op), current, self.eval(stmt.value, scope)), scope)

    def _exec_Pass(self, stmt: ast.Pass, scope: Scope) -> None:
        pass

    def _exec_Assert(self, stmt: ast.Assert, scope: Scope) -> None:
        pass  # checks on results the loader does not compute

    def _exec_Delete(self, stmt: ast.Delete, scope: Scope) -> None:
        for target in stmt.targets:
            if isinstance(target, ast.Name):
                scope.names.pop(target.id, None)

    def _exec_If(self, stmt: ast.If, scope: Scope) -> None:
        self.exec_block(stmt.body if self.truth(self.eval(stmt.test, scope)) else stmt.orelse, scope)

    def _exec_For(self, stmt: ast.For, scope: Scope) -> None:
        self._loop_depths[-1] += 1
        try:
            self._loop(stmt, scope)
        finally:
            self._loop_depths[-1] -= 1

    def _loop(self, stmt: ast.For, scope: Scope) -> None:
        once = not self._defining
        for item in self.iterate(self.eval(stmt.iter, scope)):
            self.assign(stmt.target, item, scope)
            try:
                self.exec_block(stmt.body, scope)
            except _Break:
                return
            except _Continue:
                pass
            if once:
                break
        self.exec_block(stmt.orelse, scope)

    def _exec_Break(self, stmt: ast.Break, scope: Scope) -> None:
        raise _Break

    def _exec_Continue(self, stmt: ast.Continue, scope: Scope) -> None:
        raise _Continue

    def _exec_Return(self, stmt: ast.Return, scope: Scope) -> None:
        raise _Return(None if stmt.value is None else self.eval(stmt.value, scope))

    def _exec_Try(self, stmt: ast.Try, scope: Scope) -> None:
        # Handlers are skipped: whatever the body cannot do is already a problem.
        for block in (stmt.body, stmt.orelse, stmt.finalbody):
            self.exec_block(block, scope)

    def _exec_FunctionDef(self, stmt: ast.FunctionDef, scope: Scope) -> None:
        scope.names[stmt.name] = ScriptFunction(stmt, scope)  # decorators are never evaluated

    def _exec_ClassDef(self, stmt: ast.ClassDef, scope: Scope) -> None:
        """The class body is interpreted as Python runs it, once, in a scope of its own
        (methods are kept, not run, and do not see that scope); a refused statement of
        it is a problem and leaves its name unavailable. `@dataclass` and a NamedTuple
        base make the annotated names fields, in order."""
        bases, named_tuple = self._bases(stmt, scope)
        options = self._dataclass_options(stmt, scope)
        body = scope.child()
        for item in stmt.body:
            if isinstance(item, ast.FunctionDef):
                body.names[item.name] = ScriptFunction(item, scope)  # decorators are read when used
            else:
                self.exec_statement(item, body)
        attrs = body.names
        cls = ScriptClass(stmt.name, attrs, stmt.lineno, bases)
        if options is not None or named_tuple:
            cls.frozen = named_tuple or bool(options and options.frozen)
            cls.fields = []
            for item in stmt.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    if "ClassVar" in source_text(item.annotation):
                        continue
                    name = item.target.id
                    default = attrs.get(name, MISSING)
                    if isinstance(default, FieldSpec):
                        default = default.value(stmt.name, name)
                        if default is MISSING:
                            del attrs[name]
                        else:
                            attrs[name] = default
                    cls.fields.append((name, default))
        scope.names[stmt.name] = cls

    def _bases(self, stmt: ast.ClassDef, scope: Scope) -> tuple[list[ScriptClass], bool]:
        """The script's own classes among the bases; others (object, unittest.TestCase,
        a test suite's base class) add nothing a loaded script reads."""
        bases: list[ScriptClass] = []
        named_tuple = False
        for node in stmt.bases:
            try:
                value = self.eval(node, scope)
            except LoadLimitExceeded:
                raise
            except FuserError:
                continue
            if isinstance(value, ScriptClass):
                bases.append(value)
            named_tuple = named_tuple or value is NAMED_TUPLE
        return bases, named_tuple

    def _dataclass_options(self, stmt: ast.ClassDef, scope: Scope) -> DataclassOptions | None:
        for decorator in stmt.decorator_list:
            if decorator_name(decorator).split(".")[-1] != "dataclass":
                continue
            value = self.eval(decorator, scope)  # dataclasses.dataclass, or its options
            if isinstance(value, DataclassOptions):
                return value
            if isinstance(value, SafeFunction) and value.name == "dataclass":
                return DataclassOptions()
            raise FuserError(f"`@{source_text(decorator)}` is not dataclasses.dataclass")
        return None

    def _exec_With(self, stmt: ast.With, scope: Scope) -> None:
        if len(stmt.items) != 1:
            raise FuserError("a `with` of several context managers is not supported in repro scripts")
        item = stmt.items[0]
        context = self.eval(item.context_expr, scope)
        if isinstance(context, PassContext):
            self.exec_block(stmt.body, scope)
            return
        if not isinstance(context, FusionDefinition):
            raise FuserError(f"`with` a {kind_of(context)} is not supported: only `with FusionDefinition() as fd:`")
        name = "fd"
        if item.optional_vars is not None:
            self.assign(item.optional_vars, context, scope)
            name = ast.unparse(item.optional_vars)
        if self._functions:  # named after the function that makes it
            name = self._functions[-1]
        self.define(context, lambda: self.exec_block(stmt.body, scope), name, stmt.lineno)

    def _exec_Import(self, stmt: ast.Import, scope: Scope) -> None:
        refused = []
        for alias in stmt.names:
            top = alias.name.split(".")[0]
            if alias.name in MODULES:
                scope.names[alias.asname or top] = MODULES[alias.name if alias.asname else top]
                continue
            refused.append(alias.name)
            if alias.asname is None and top in MODULES:  # `import torch.nn` still binds torch
                scope.names[top] = MODULES[top]
            else:
                bound = alias.asname or top
                scope.names[bound] = Unavailable(bound, f"`import {alias.name}` at line {stmt.lineno} was refused")
        if refused:
            raise _import_refusal(refused)

    def _exec_ImportFrom(self, stmt: ast.ImportFrom, scope: Scope) -> None:
        if stmt.module == "__future__":
            return
        module = MODULES.get(stmt.module or "") if stmt.level == 0 else None
        refused = []
        for alias in stmt.names:
            bound = alias.asname or alias.name
            if module is not None and alias.name == "*":
                scope.names.update(module.members)
            elif module is not None and alias.name in module.members:
                scope.names[bound] = module.members[alias.name]
            else:
                refused.append(f"{stmt.module}.{alias.name}")
                reason = f"`from {stmt.module} import {alias.name}` at line {stmt.lineno} was refused"
                scope.names[bound] = Unavailable(bound, reason)
        if refused:
            raise _import_refusal(refused)


def _first_case(names: Any, values: Any) -> dict[str, Any]:
    """parametrize's names ("a, b", or a list of them) bound to its first case."""
    if isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        raise FuserError(f"argnames must be a string or a list of strings, got {names!r}", op="parametrize")
    if not isinstance(values, (list, tuple)):
        raise FuserError(f"argvalues must be a list, got a {kind_of(values)}", op="parametrize")
    if not values:
        return {}
    case = values[0]
    items = list(case.values) if isinstance(case, ParamCase) else None
    if len(names) == 1:
        return {names[0]: items[0] if items is not None else case}
    if items is None:
        if not isinstance(case, (list, tuple)):
            raise FuserError(f"a case of {len(names)} names must be a tuple, got a {kind_of(case)}", op="parametrize")
        items = list(case)
    if len(items) != len(names):
        raise FuserError(f"a case has {len(items)} values for {len(names)} names {names}", op="parametrize")
    return dict(zip(names, items, strict=True))


def _field_values(cls: ScriptClass, args: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    fields = cls.all_fields()
    names = [name for name, _ in fields]
    if len(args) > len(names):
        raise FuserError(f"takes {len(names)} fields but {len(args)} arguments were given", op=cls.name)
    values = dict(zip(names, args, strict=False))
    for key, value in kwargs.items():
        if key not in names:
            raise FuserError(f"got an unexpected keyword argument {key!r} (fields: {names})", op=cls.name)
        if key in values:
            raise FuserError(f"got multiple values for field {key!r}", op=cls.name)
        values[key] = value
    for name, default in fields:
        if name not in values:
            if default is MISSING:
                raise FuserError(f"missing field {name!r}", op=cls.name)
            values[name] = default
    return values


def _makes_definition(node: ast.FunctionDef) -> bool:
    """Whether the function itself holds a `with FusionDefinition(...)` block."""
    for item in ast.walk(node):
        if isinstance(item, ast.With):
            for with_item in item.items:
                call = with_item.context_expr
                if isinstance(call, ast.Call) and decorator_name(call).split(".")[-1] == "FusionDefinition":
                    return True
    return False


def _needs_no_arguments(node: ast.FunctionDef) -> bool:
    args = node.args
    required = len(args.posonlyargs) + len(args.args) - len(args.defaults)
    return required == 0 and all(d is not None for d in args.kw_defaults)


def _import_refusal(names: list[str]) -> FuserError:
    allowed = ", ".join(sorted(MODULES))
    return FuserError(f"import of `{'`, `'.join(names)}` refused: a repro script may import only {allowed}")


def _inside(fd: FusionDefinition, body: Callable[[], Any]) -> None:
    """`with fd: body()`; a return from inside completes the definition first."""
    fd.__enter__()
    try:
        body()
    except _Signal:
        fd.__exit__(None, None, None)
        raise
    except BaseException as exc:
        fd.__exit__(type(exc), exc, exc.__traceback__)
        raise
    fd.__exit__(None, None, None)
