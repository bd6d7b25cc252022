"""Security checks' shared material: what a leaked credential looks like, and names that must never reach SQL."""

from __future__ import annotations

import ast
import functools
import re

import botocore.session

# What a leaked AWS credential or private key looks like (AWS's documented formats).
CREDENTIAL_PATTERNS = {
    "access key id": re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b"),
    "secret access key": re.compile(
        r"(?i)(?:aws_secret_access_key|secretaccesskey|secret_key)[\"'\s]*[:=]\s*[\"']?[A-Za-z0-9/+]{40}\b"
    ),
    "session token": re.compile(r"(?i)aws_session_token[\"'\s]*[:=]\s*[\"']?[A-Za-z0-9/+=]{100,}"),
    "private key": re.compile(r"-----BEGIN (?:RSA |EC |DSA |OPENSSH |ENCRYPTED )?PRIVATE KEY-----"),
}
# Names that try to break out of an identifier: each must be refused before any SQL is built.
INJECTIONS = [
    "events; DROP TABLE lake.x",
    "events --",
    "a.b",
    "x` OR `1`=`1",
    "' OR '1'='1",
    "t/*c*/",
    "",
    "1events",
    "events\n",
    "évents",
    "a" * 129,
    "${jndi:ldap://127.0.0.1/x}",
]


def leaks(text: str) -> list[str]:
    """The kinds of credential (keys of ``CREDENTIAL_PATTERNS``) that ``text`` holds."""
    return [name for name, pattern in CREDENTIAL_PATTERNS.items() if pattern.search(text)]


# --- Finding every AWS client the code creates, and the calls made on each ---------------------------------------


@functools.cache
def botocore_services() -> frozenset[str]:
    """Every service name botocore knows (``kinesis``, ``glue``, ``s3``...)."""
    return frozenset(botocore.session.get_session().get_available_services())


def unit_of(tree: ast.Module) -> dict[int, str]:
    """``id(node) -> name`` of the top-level function or class each node sits in (``<module>`` outside any)."""
    units: dict[int, str] = {}
    for top in tree.body:
        name = top.name if isinstance(top, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) else "<module>"
        for node in ast.walk(top):
            units[id(node)] = name
    return units


def _called_name(call: ast.Call) -> str | None:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None


def client_services(node: ast.AST, factories: dict[str, set[str]], bound: dict[str, set[str]]) -> set[str]:
    """The services of the clients an expression evaluates to (empty: not a client, as far as the code shows).

    Recognised: ``boto3.client("x")``, ``session.client("x")``, ``aws.client(settings, "x")`` (a literal
    botocore service name among the arguments of a call named ``client``), a call of a function that
    returns a client (``kinesis_client(...)``, ``connection.client()``), a name or attribute the code
    bound to a client (``glue = aws.client(...)``, ``self._client = ...``), and ``a or b`` of those.
    """
    if isinstance(node, ast.BoolOp):
        return set().union(*(client_services(value, factories, bound) for value in node.values))
    if isinstance(node, ast.Call):
        name = _called_name(node)
        literals = {arg.value for arg in node.args if isinstance(arg, ast.Constant) and isinstance(arg.value, str)}
        named = literals & botocore_services()
        if name == "client" and named:
            return named
        return set(factories.get(name or "", set()))
    if isinstance(node, ast.Name | ast.Attribute | ast.Subscript):
        return set(bound.get(ast.unparse(node), set()))
    return set()


def _bindings(scope: ast.AST, factories: dict[str, set[str]]) -> dict[str, set[str]]:
    """Names, attributes and subscripts a scope assigns a client to (``ast.unparse`` of the target)."""
    bound: dict[str, set[str]] = {}
    for _ in range(3):  # a binding may come from another one (``client = self._client``)
        for node in ast.walk(scope):
            if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
                services = client_services(node.value, factories, bound)
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets if services else []:
                    bound.setdefault(ast.unparse(target), set()).update(services)
    return bound


def client_factories(trees: dict[str, ast.Module]) -> dict[str, set[str]]:
    """Function name -> services of the client it returns, to a fixed point (wrappers of wrappers)."""
    factories: dict[str, set[str]] = {}
    functions = [
        node
        for tree in trees.values()
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    ]
    changed = True
    while changed:
        changed = False
        for function in functions:
            bound = _bindings(function, factories)
            returned = set().union(
                *(
                    client_services(node.value, factories, bound)
                    for node in ast.walk(function)
                    if isinstance(node, ast.Return) and node.value is not None
                )
            )
            if returned - factories.get(function.name, set()):
                factories.setdefault(function.name, set()).update(returned)
                changed = True
    return factories


def client_calls(
    tree: ast.Module, factories: dict[str, set[str]], operations: dict[str, dict[str, str]]
) -> tuple[set[tuple[str, str, str]], set[tuple[str, str]]]:
    """``(unit, service, operation)`` of API calls, and ``(unit, service)`` of every client created.

    A call's service is its receiver's when the code shows it (a client expression or a name bound to
    one in the same top-level unit); otherwise, on a receiver named ``*client*`` (a client passed in as a
    parameter, e.g. the producer's ``client``), a method named like an operation of exactly one service.

    Args:
        tree: One module or notebook cell.
        factories: From :func:`client_factories` over all the code.
        operations: ``service -> {boto3 method: API operation}`` of the services to look for.
    """
    units = unit_of(tree)
    bound_by_unit = {
        units[id(top)]: _bindings(top, factories)
        for top in tree.body
        if not isinstance(top, ast.Import | ast.ImportFrom)
    }
    calls: set[tuple[str, str, str]] = set()
    created: set[tuple[str, str]] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        unit = units.get(id(node), "<module>")
        bound = bound_by_unit.get(unit, {})
        created |= {(unit, service) for service in client_services(node, factories, {})}
        if not isinstance(node.func, ast.Attribute):
            continue
        method = node.func.attr
        receiver = client_services(node.func.value, factories, bound)
        if receiver:
            calls |= {(unit, service, operations[service][method]) for service in receiver
                      if service in operations and method in operations[service]}  # fmt: skip
            continue
        owners = [service for service, methods in operations.items() if method in methods]
        named_client = "client" in ast.unparse(node.func.value).rsplit(".", 1)[-1].lower()
        if len(owners) == 1 and named_client:
            calls.add((unit, owners[0], operations[owners[0]][method]))
    return calls, created
