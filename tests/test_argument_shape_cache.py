"""A durable call's argument shape is what it was before signatures were kept per code object.

``argument_shape`` (kept in every call record, compared by a replay) binds the arguments
through a signature built once per code object, and binds positional arguments without
``Signature.bind`` where it can (``_binding``). Records written before must keep matching:
each shape here is compared with the one the former code computed (``_former_shape``, the
implementation as it was, inspecting the callable at every call), for module-level
functions, lambdas and closures, partials, bound methods, callable objects, wrappers and
every kind of parameter; and a function whose defaults change after its signature was kept
binds by its new defaults.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

import pytest

from flink_agents_py.runtime._serde import digest, dumps, to_json_value
from flink_agents_py.runtime.recorder._binding import bound_arguments
from flink_agents_py.runtime.recorder._call_changes import defaults_taken, effective
from flink_agents_py.runtime.recorder._identity import bound_and_nested
from flink_agents_py.runtime.recorder._outcomes import argument_shape, code_of
from flink_agents_py.runtime.recorder._value_classes import value_classes


def _former_shape(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    """``argument_shape`` as it was before signatures were kept (the reference), with the
    eighth part (which of the arguments' lists were tuples) kept since."""
    try:
        sig = inspect.signature(fn)
        binding = sig.bind(*args, **kwargs).arguments
        named = to_json_value(dict(binding), "arguments")
        values: list[Any] = []
        for name, value in named.items():
            kind = sig.parameters[name].kind
            if kind is inspect.Parameter.VAR_POSITIONAL:
                values += value
            elif kind is inspect.Parameter.VAR_KEYWORD:
                values += value.values()
            else:
                values.append(value)
        bound, nested = bound_and_nested(fn)
        kinds: list[str] = []
        classes = value_classes(dict(binding), sort_dicts=True, kinds=kinds)
        code = code_of(fn)
        taken, forms = defaults_taken(sig, binding)  # from this very function's signature
        parts = [
            digest([named, bound, classes]),
            digest([sorted(dumps(v).decode() for v in values), bound]),
            code or "",
            nested or "",
            digest([named, classes]) if bound is not None else "",
            taken,
            digest([effective(sig, named, forms), bound, classes]) if forms else "",
            "".join(kinds),
        ]
        while not parts[-1]:
            parts.pop()
        return "/".join(parts)
    except Exception:  # noqa: BLE001 - as the former code: no shape
        return None


def plain(a: Any, b: Any = 2) -> Any:
    return (a, b)


def positional_only(a: Any, /, b: Any, c: Any = 3) -> Any:
    return (a, b, c)


def keyword_only(a: Any, *, b: Any, c: Any = 3) -> Any:
    return (a, b, c)


def keyword_only_defaults(a: Any, *, c: Any = 3) -> Any:
    return (a, c)


def star_args(a: Any, *rest: Any) -> Any:
    return (a, rest)


def star_kwargs(a: Any, **more: Any) -> Any:
    return (a, more)


def everything(a: Any, /, b: Any = 1, *rest: Any, c: Any = 2, **more: Any) -> Any:
    return (a, b, rest, c, more)


def no_parameters() -> Any:
    return None


def _decorated(fn: Any) -> Any:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    return wrapper


wrapped = _decorated(plain)
wrapped_other = _decorated(keyword_only)  # the same wrapper's code, another signature


def with_signature(*args: Any) -> Any:
    return args


with_signature.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
    [inspect.Parameter("x", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
)


class Shop:
    def __init__(self, name: str) -> None:
        self.name = name

    def price(self, item: Any, qty: Any = 1) -> Any:
        return (self.name, item, qty)

    def __call__(self, item: Any) -> Any:
        return (self.name, item)


def _closure(rate: float) -> Any:
    def convert(amount: Any, currency: Any = "EUR") -> Any:
        return amount * rate, currency

    return convert


CALLABLES: dict[str, Any] = {
    "plain": plain,
    "positional_only": positional_only,
    "keyword_only": keyword_only,
    "keyword_only_defaults": keyword_only_defaults,
    "star_args": star_args,
    "star_kwargs": star_kwargs,
    "everything": everything,
    "no_parameters": no_parameters,
    "wrapped": wrapped,
    "wrapped_other": wrapped_other,
    "with_signature": with_signature,
    "lambda": lambda x, y=5: (x, y),
    "closure": _closure(1.5),
    "partial": functools.partial(plain, 1),
    "partial_keyword": functools.partial(plain, b=9),
    "bound_method": Shop("a").price,
    "callable_object": Shop("b"),
    "builtin": len,
    "class": Shop,
}

CALLS: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
    ((), {}),
    ((1,), {}),
    ((1, 2), {}),
    ((1, 2, 3), {}),
    ((1, 2, 3, 4), {}),
    ((1,), {"b": 2}),
    ((), {"a": 1}),
    ((1,), {"c": 5}),
    ((1,), {"b": 2, "c": 5}),
    ((1,), {"zz": 7}),
    ((1, 2), {"b": 3}),
    (("x", [1, {"k": None}]), {}),
]


@pytest.mark.parametrize("name", sorted(CALLABLES))
def test_every_shape_is_the_one_recorded_before(name):
    fn = CALLABLES[name]
    for args, kwargs in CALLS:
        for _ in range(2):  # the second time from the kept signature
            assert argument_shape(fn, args, kwargs) == _former_shape(fn, args, kwargs), (
                name,
                args,
                kwargs,
            )


@pytest.mark.parametrize("name", sorted(CALLABLES))
def test_the_binding_is_the_signatures(name):
    fn = CALLABLES[name]
    for args, kwargs in CALLS:
        try:
            expected: Any = dict(inspect.signature(fn).bind(*args, **kwargs).arguments)
        except (TypeError, ValueError) as e:
            expected = type(e)
        try:
            got: Any = dict(bound_arguments(fn, args, kwargs)[0])
        except (TypeError, ValueError) as e:
            got = type(e)
        assert got == expected, (name, args, kwargs)
        if isinstance(got, dict):
            assert list(got) == list(expected)  # in the signature's order


def test_a_function_whose_defaults_change_binds_by_its_new_ones():
    def source(a: Any, b: Any = 1) -> Any:
        return (a, b)

    assert argument_shape(source, (1,), {}) is not None
    source.__defaults__ = None  # now ``b`` must be given
    assert argument_shape(source, (1,), {}) is None
    assert _former_shape(source, (1,), {}) is None
    source.__defaults__ = (1,)
    assert argument_shape(source, (1,), {}) == _former_shape(source, (1,), {})
    source.__defaults__ = (2,)  # the same count of defaults, another value
    assert argument_shape(source, (1,), {}) == _former_shape(source, (1,), {})
    source.__kwdefaults__ = None
    source.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter("z", inspect.Parameter.KEYWORD_ONLY)]
    )
    assert argument_shape(source, (1,), {}) is None  # its own signature now: no positional
    assert argument_shape(source, (), {"z": 1}) == _former_shape(source, (), {"z": 1})


def test_lambdas_of_one_code_with_other_defaults_bind_by_their_own():
    one, two = [lambda a, b=i: (a, b) for i in range(2)]
    assert one.__code__ is two.__code__
    argument_shape(one, (1,), {})  # its signature kept: ``two``'s default is another
    assert argument_shape(two, (1,), {}) != argument_shape(one, (1,), {})  # (the defaults part)
    assert argument_shape(one, (1,), {}) == _former_shape(one, (1,), {})
    assert argument_shape(two, (1,), {}) == _former_shape(two, (1,), {})
    three = type(one)(one.__code__, one.__globals__, None, None, one.__closure__)  # no default
    assert argument_shape(three, (1,), {}) is None  # ``b`` missing: not the first one's binding
    assert argument_shape(three, (1, 2), {}) == _former_shape(three, (1, 2), {})
