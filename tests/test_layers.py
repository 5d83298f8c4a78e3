"""Layering: the engine-neutral packages work without PyFlink; the API does not load the runtime."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run_fresh(code: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_engine_neutral_packages_import_and_run_without_pyflink():
    out = run_fresh("""
        import json, sys
        sys.modules["pyflink"] = None  # any 'import pyflink...' now raises ImportError
        import flink_agents_py
        import flink_agents_py.api
        import flink_agents_py.plan
        import flink_agents_py.runtime
        import flink_agents_py.local
        from flink_agents_py import AgentsExecutionEnvironment
        from flink_agents_py.api import Agent, InputEvent, OutputEvent, action

        class Echo(Agent):
            @action(InputEvent)
            @staticmethod
            async def on_input(event, ctx):
                ctx.send_event(OutputEvent(output={"key": ctx.key, "echo": event.input}))

        outs = AgentsExecutionEnvironment.local().from_list(
            [{"key": "a", "v": 1}, {"key": "b", "v": 2}]).apply(Echo()).collect()
        loaded = sorted(m for m in sys.modules if m.startswith("pyflink") and sys.modules[m])
        print(json.dumps({"outs": sorted(o["key"] for o in outs), "pyflink": loaded}))
    """)
    assert out == {"outs": ["a", "b"], "pyflink": []}


def test_flink_environment_without_pyflink_raises_import_error():
    out = run_fresh("""
        import json, sys
        sys.modules["pyflink"] = None
        from flink_agents_py import AgentsExecutionEnvironment
        try:
            AgentsExecutionEnvironment.flink(object())
        except ImportError as e:
            print(json.dumps({"error": str(e)}))
        else:
            print(json.dumps({"error": None}))
    """)
    assert out["error"] is not None and "apache-flink" in out["error"]


def test_api_does_not_import_runtime():
    out = run_fresh("""
        import json, sys
        import flink_agents_py.api
        print(json.dumps(sorted(m for m in sys.modules
                                if m.startswith(("flink_agents_py.runtime", "pyflink")))))
    """)
    assert out == [], f"importing flink_agents_py.api loaded {out}"


def test_a_flink_worker_loads_the_operator_without_the_client_side():
    # what a TaskManager imports to unpickle the agent operator and the default key
    # selector, and to open the operator's observability: neither the job builder, Kafka,
    # the worker checks, the local runner nor the traces and their OpenTelemetry export
    pytest.importorskip("pyflink")
    out = run_fresh("""
        import json, sys
        import flink_agents_py.flink._operator, flink_agents_py.flink._fresh
        import flink_agents_py.local._records
        from flink_agents_py.observability import HostObservability
        print(json.dumps(sorted(m for m in sys.modules if m.startswith(
            ("flink_agents_py.flink.", "flink_agents_py.local.",
             "flink_agents_py.observability.")))))
    """)
    assert "flink_agents_py.flink._operator" in out  # the check sees what loaded
    assert "flink_agents_py.observability._host" in out
    client = [m for m in out if m.rsplit(".", 1)[1] in (
        "_builder", "_environment", "_kafka", "_kafka_jars", "_kafka_journal", "_kafka_sink",
        "_kafka_source", "_files", "_progress", "_workers", "_runner", "_clock",
        "_otel", "_trace", "_trace_html")]
    assert client == [], f"the operator's imports loaded {client}"


def test_the_lazy_packages_give_every_public_name():
    pytest.importorskip("pyflink")
    out = run_fresh("""
        import json
        import flink_agents_py.flink as flink, flink_agents_py.local as local
        import flink_agents_py.observability as obs
        packages = (flink, local, obs)
        names = {p.__name__: sorted(p.__all__) for p in packages}
        star = {}
        for p in packages:
            ns = {}
            exec(f"from {p.__name__} import *", ns)
            star[p.__name__] = sorted(n for n in ns if n != "__builtins__")
        homes = {n: getattr(flink, n).__module__ for n in ("AgentOperator", "KafkaJournal")}
        homes["render_html"] = obs.render_html.__module__
        missing = [n for p in packages for n in p.__all__ if n not in dir(p)]
        print(json.dumps({"names": names, "star": star, "homes": homes, "missing": missing}))
    """)
    assert out["star"] == out["names"]
    assert "FlinkExecutionEnvironment" in out["names"]["flink_agents_py.flink"]
    assert "LocalExecutionEnvironment" in out["names"]["flink_agents_py.local"]
    assert "OtelSink" in out["names"]["flink_agents_py.observability"]
    assert out["homes"] == {"AgentOperator": "flink_agents_py.flink._operator",
                            "KafkaJournal": "flink_agents_py.flink._kafka_journal",
                            "render_html": "flink_agents_py.observability._trace_html"}
    assert out["missing"] == []
    import flink_agents_py.flink as flink

    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = flink.Nope


MAX_MODULE_LINES = 600


def test_no_library_module_is_over_600_lines():
    sizes = {str(p.relative_to(ROOT)): len(p.read_text(encoding="utf-8").splitlines())
             for p in sorted((ROOT / "flink_agents_py").rglob("*.py"))}
    assert len(sizes) > 50, "the library's modules were not found"
    over = {path: n for path, n in sizes.items() if n > MAX_MODULE_LINES}
    assert not over, f"split these modules (over {MAX_MODULE_LINES} lines): {over}"


def _package_of(path: Path) -> str:
    """The dotted package ``path`` (a module of the library) is in."""
    return ".".join(path.parent.relative_to(ROOT).parts)


def _imports_of(path: Path, package: str) -> set[str]:
    """Absolute names of the modules ``path`` imports (relative imports resolved; imports
    under ``if TYPE_CHECKING:`` and inside functions count too)."""
    import ast

    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            if node.level:
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            found.add(mod)
            found.update(f"{mod}.{a.name}" for a in node.names)  # from . import _core
    return found


def test_runtime_modules_other_than_the_core_do_not_import_it():
    core = "flink_agents_py.runtime.core._core"
    runtime = ROOT / "flink_agents_py" / "runtime"
    importers = {str(p.relative_to(runtime)) for p in sorted(runtime.rglob("*.py"))
                 if core in _imports_of(p, _package_of(p))}
    # the detector sees the package's own import of the core (so it can fail)
    allowed = {"__init__.py", "core/_core.py"}
    assert "__init__.py" in importers
    assert importers <= allowed, (
        f"{sorted(importers - allowed)} import runtime.core._core: the core calls the "
        "execution and the invocation logic, never the other way round")


def _library_imports(path: Path, package_name: str) -> list[tuple[int, str]]:
    """``(line, module)`` for each library module ``path`` (in ``package_name``) imports.

    Relative imports are resolved; ``from X import y`` counts ``X`` and, when ``y`` is a
    module itself, ``X.y``.
    """
    import ast

    package = package_name.split(".")
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            found.append((node.lineno, mod))
            for a in node.names:
                sub = ROOT.joinpath(*mod.split("."), a.name)
                if sub.with_suffix(".py").exists() or (sub / "__init__.py").exists():
                    found.append((node.lineno, f"{mod}.{a.name}"))
    return [(n, m) for n, m in found if m.startswith("flink_agents_py.")]


def _top_package(module: str) -> str:
    """The library's top-level package ``module`` belongs to ('' for the root's modules)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and (ROOT / "flink_agents_py" / parts[1]).is_dir() else ""


def test_no_package_imports_another_packages_private_modules():
    lib = ROOT / "flink_agents_py"
    reaching: list[str] = []
    for path in sorted(lib.rglob("*.py")):
        mine = _top_package(".".join(path.relative_to(ROOT).with_suffix("").parts))
        for line, module in _library_imports(path, _package_of(path)):
            theirs = _top_package(module)
            private = [p for p in module.split(".")[1:] if p.startswith("_")]
            if theirs != mine and private:
                reaching.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert not reaching, (
        "import another package's names from its __init__ or its internal module, not from "
        "its private modules:\n" + "\n".join(reaching))


def test_the_private_import_check_sees_a_reach_into_another_package(tmp_path):
    # the detector itself: a module of the plan importing runtime._serde is caught
    probe = tmp_path / "_probe.py"
    probe.write_text("from ..runtime._serde import dumps\nfrom ..api import Event\n")
    found = _library_imports(probe, "flink_agents_py.plan")
    assert (1, "flink_agents_py.runtime._serde") in found
    assert _top_package("flink_agents_py.runtime._serde") != _top_package(
        "flink_agents_py.plan._probe_for_layers_test")


def test_the_plan_names_no_runtime_module_in_its_code():
    # the built-in actions are handed to the plan by the runtime (runtime/_builtins.py), not
    # named by the plan as 'module:function' strings the import graph cannot see
    import ast

    named: list[str] = []
    for path in sorted((ROOT / "flink_agents_py" / "plan").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                      if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef))
                      and n.body and isinstance(n.body[0], ast.Expr)}
        named.extend(f"{path.name}:{n.lineno}" for n in ast.walk(tree)
                     if isinstance(n, ast.Constant) and isinstance(n.value, str)
                     and "flink_agents_py.runtime" in n.value and id(n) not in docstrings)
    assert not named, f"the plan names runtime modules in strings: {named}"


def test_the_built_in_actions_are_the_runtimes_and_every_plan_carries_them():
    out = run_fresh("""
        import json
        import flink_agents_py.runtime
        from flink_agents_py.api import Agent, InputEvent, action
        from flink_agents_py.plan import AgentPlan
        from flink_agents_py.runtime._builtins import BUILTINS, CHAT_ROUTES

        class A(Agent):
            @action(InputEvent)
            @staticmethod
            def go(event, ctx):
                pass

        plan = AgentPlan.from_agent(A())
        print(json.dumps({
            "same": all(plan.actions[b.name].function.resolve() is b.function
                        and plan.actions[b.name].triggers == b.triggers for b in BUILTINS),
            "routes": sorted(set(CHAT_ROUTES.values())),
        }))
    """)
    assert out == {"same": True, "routes": ["_chat_model_action", "_tool_call_action"]}


def test_a_users_action_gets_exactly_what_runner_context_promises():
    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
    from flink_agents_py.runtime import ActionContext

    def public(cls: type) -> set[str]:
        return {n for n in dir(cls) if not n.startswith("_")}

    seen: list[Any] = []

    class Look(Agent):
        @action(InputEvent)
        @staticmethod
        def look(event: InputEvent, ctx: RunnerContext) -> None:
            seen.append(ctx)
            ctx.send_event(OutputEvent(output=event.input))

    res = AgentsExecutionEnvironment.local().from_list([1]).apply(Look()).run()
    assert res.outputs == [1]
    (ctx,) = seen
    assert type(ctx) is ActionContext
    assert public(type(ctx)) == public(RunnerContext)
    assert not hasattr(ctx, "__dict__")  # slots all the way: nothing else can be hung on it
