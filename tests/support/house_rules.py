"""The variable and exit-code rules read from a module's syntax tree (ast), for tests/test_architecture.py:
each finding is `path:line: what is wrong; the fix`, so that a failing check says where and how.

- A registered variable's name is spelled only in ftenv/variables.py: a string of the code (not a
  docstring) that holds an FTENV_ name or is a registered name, or a keyword argument so named, is a
  finding.
- A registered variable is read only through ftenv.variables' accessors, which apply its registered
  default: looked up by hand (`env.get(variables.X)`, `os.getenv(variables.X)`, `env[variables.X]`,
  `variables.X in env`) is a finding. The rest of the environment is read as any mapping is.
- An exit code ftenv chooses is a name of ftenv/outcome.py: a literal other than 0 handed to sys.exit,
  SystemExit or os._exit, or returned by a function that returns exit codes (named main or run, or
  one that also returns an outcome name or says "exit code" in its docstring), is a finding.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

from ftenv import outcome

FTENV_NAME = re.compile(r"\bFTENV_[A-Z][A-Z0-9_]*")
#: Local names the variables module is imported under.
VARIABLES_ALIASES = {"variables", "V"}
#: Calls that look a name up: a mapping's get, os.getenv.
LOOKUPS = {"get", "getenv"}
#: Names that say a function returns exit codes.
EXIT_FUNCTION = re.compile(r"(^|_)(main|run)($|_)")
#: Names of ftenv.outcome's codes (a function returning one returns exit codes).
OUTCOME_NAMES = {c.name for c in outcome.EXIT_CODES} | {"EXIT", "INCONCLUSIVE_CODE"}

SPELLING_FIX = "name it as ftenv.variables.<NAME> (add it to REGISTRY with its default and meaning)"
READ_FIX = "read it with ftenv.variables.read/given/read_float/read_seconds (they apply its default)"
EXIT_FIX = "use ftenv.outcome's name for the code (add it to EXIT_CODES if it is new)"


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring nodes: prose may name a variable."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def spelled_names(tree: ast.AST, registered: set[str]) -> list[tuple[int, str]]:
    """(line, name) of each variable name the code spells: an FTENV_ name in a string (f-string parts
    included), a string that is exactly a registered name, a keyword argument so named."""
    skip = _docstrings(tree)
    skip |= {id(k.value) for k in ast.walk(tree) if isinstance(k, ast.keyword) and k.arg == "metavar"}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            names = FTENV_NAME.findall(node.value)
            if not names and node.value in registered:
                names = [node.value]
            found += [(node.lineno, n) for n in names]
        elif (
            isinstance(node, ast.keyword)
            and node.arg
            and (node.arg in registered or FTENV_NAME.match(node.arg))
        ):
            found.append((node.value.lineno, node.arg))
    return found


def _is_variable(node: ast.AST) -> bool:
    """`variables.NAME` (or V.NAME): a registered variable's constant."""
    return (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id in VARIABLES_ALIASES
        and node.attr.isupper()
    )


def hand_reads(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, what) of each registered variable read past the accessors."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args and _is_variable(node.args[0]):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in LOOKUPS:
                found.append((node.lineno, f"{ast.unparse(func)}({ast.unparse(node.args[0])})"))
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _is_variable(node.slice):
            found.append((node.lineno, f"a mapping's [{ast.unparse(node.slice)}]"))
        elif (
            isinstance(node, ast.Compare)
            and _is_variable(node.left)
            and any(isinstance(op, ast.In | ast.NotIn) for op in node.ops)
        ):
            found.append((node.lineno, f"{ast.unparse(node.left)} in a mapping"))
    return found


def _literal_codes(node: ast.AST | None) -> list[int]:
    """The int literals other than 0 an expression may evaluate to (`1`, `2 if x else 0`, `x or 1`)."""
    if isinstance(node, ast.Constant) and type(node.value) is int and node.value != 0:
        return [node.value]
    if isinstance(node, ast.IfExp):
        return _literal_codes(node.body) + _literal_codes(node.orelse)
    if isinstance(node, ast.BoolOp):
        return [c for v in node.values for c in _literal_codes(v)]
    return []


def _own_returns(func: ast.AST) -> list[ast.Return]:
    """The returns of func itself, not of the functions defined inside it."""
    found, todo = [], list(ast.iter_child_nodes(func))
    while todo:
        node = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            continue
        if isinstance(node, ast.Return):
            found.append(node)
        todo += list(ast.iter_child_nodes(node))
    return found


def _seeds(tree: ast.AST) -> set[str]:
    """Functions that say they return exit codes: named main or run, "exit code" in the docstring,
    an outcome name returned, or handed to argparse as a command (`set_defaults(func=F)`)."""
    seeds = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            returned = {
                getattr(n, "attr", getattr(n, "id", None)) for r in _own_returns(node) for n in ast.walk(r)
            }
            if (
                EXIT_FUNCTION.search(node.name.lower())
                or "exit code" in (ast.get_docstring(node) or "").lower()
                or returned & OUTCOME_NAMES
            ):
                seeds.add(node.name)
        elif isinstance(node, ast.keyword) and node.arg == "func" and isinstance(node.value, ast.Name):
            seeds.add(node.value.id)
    return seeds


def _handed_on(func: ast.AST) -> set[str]:
    """Functions whose result func returns: `return F(...)`, or `x = F(...)` then `return x`."""
    returned = {r.value.id for r in _own_returns(func) if isinstance(r.value, ast.Name)}
    found = set()
    for node in ast.walk(func):
        if (isinstance(node, ast.Return) and isinstance(node.value, ast.Call)) or (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and any(isinstance(t, ast.Name) and t.id in returned for t in node.targets)
        ):
            found.add(ast.unparse(node.value.func).split(".")[-1])
    return found


def exit_functions(tree: ast.AST) -> set[str]:
    """The module's functions that return exit codes: the seeds and the functions whose result they
    return, as far as the module says."""
    defs = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    found, todo = set(), list(_seeds(tree) & defs.keys())
    while todo:
        name = todo.pop()
        if name not in found:
            found.add(name)
            todo += [f for f in _handed_on(defs[name]) if f in defs]
    return found


def bare_codes(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, what) of each exit code written as a number."""
    found = []
    exits = exit_functions(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args:
            func = ast.unparse(node.func)
            if func in ("sys.exit", "SystemExit", "os._exit", "exit", "quit"):
                found += [(node.lineno, f"{func}({c})") for c in _literal_codes(node.args[0])]
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in exits:
            found += [
                (r.lineno, f"{node.name}() returns {c}")
                for r in _own_returns(node)
                for c in _literal_codes(r.value)
            ]
    return found


@functools.lru_cache(maxsize=1024)
def _parse(path: Path, mtime_ns: int) -> ast.Module:
    """A file's tree, read once while it stays as it is."""
    return ast.parse(path.read_text(), str(path))


def findings(files: list[Path], root: Path, registered: set[str], rule: str) -> list[str]:
    """`path:line: what; fix` for each breach of rule ("spelling", "reads", "exit") in files."""
    check, fix = {
        "spelling": (lambda t: spelled_names(t, registered), SPELLING_FIX),
        "reads": (hand_reads, READ_FIX),
        "exit": (bare_codes, EXIT_FIX),
    }[rule]
    out = []
    for path in files:
        tree = _parse(path, path.stat().st_mtime_ns)
        rel = path.relative_to(root)
        out += [f"{rel}:{line}: {what}; {fix}" for line, what in sorted(check(tree))]
    return out
