"""The OpenTelemetry exporter: one span per trace event, through a real plugin manager and the
SDK's in-memory exporter."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the otel extra is not installed")

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind, StatusCode  # noqa: E402

import orion  # noqa: E402
from orion.clock import VirtualClock  # noqa: E402
from orion.models.events import Finish, Usage  # noqa: E402
from orion.hooks.manager import make_plugin_manager  # noqa: E402
from orion.statechart import load_definition  # noqa: E402
from orion.tools.executor import ToolOutcome  # noqa: E402
from orion.trace import events as ev  # noqa: E402
from orion.trace.events import SEMCONV_SCHEMA_URL, TraceEvent  # noqa: E402
from orion_plugins.otel_exporter import OtelExporter, flatten, to_ns  # noqa: E402

AT = 1_700_000_000_123.5  # ms since the epoch
AT_NS = 1_700_000_000_123_500_000
CONVERSATION = "conv-42"
UNAVAILABLE = "opentelemetry-sdk is not installed; install Orion with its otel extra"


@pytest.fixture
def spans():
    return InMemorySpanExporter()


@pytest.fixture
def pm(spans):
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    pm = make_plugin_manager(entrypoints=False, env={})
    pm.register(OtelExporter(provider), "otel-test")
    pm.check()
    return pm


def store(pm, tmp_path, *events):
    pm.hook.store_traces(events=list(events), blobs={}, state_dir=tmp_path)


def read_file(ok=True, kind=None):
    return ToolOutcome("call_1", "read_file", ok, "..." if ok else '{"error": "x"}', kind,
                       {"path": "src/app.py", "limit": None, "window": {"start": 1, "end": 40},
                        "ranges": [[1, 2], [5, 9]], "tags": ["a", "b"]})


# -- one span per event -----------------------------------------------------------------------


def test_a_tool_call_becomes_an_execute_tool_span(pm, spans, tmp_path):
    store(pm, tmp_path, ev.tool_call(read_file(), at_ms=AT, duration_ms=2.25,
                                     conversation_id=CONVERSATION))
    [span] = spans.get_finished_spans()
    assert span.name == "execute_tool read_file"
    assert span.kind is SpanKind.INTERNAL
    assert span.start_time == AT_NS
    assert span.end_time == AT_NS + 2_250_000
    assert span.status.status_code is StatusCode.UNSET
    assert span.parent is None
    assert dict(span.attributes) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "read_file",
        "gen_ai.tool.call.id": "call_1",
        "gen_ai.conversation.id": CONVERSATION,
        "orion.kind": "tool_call",
        "orion.tool.outcome": "ok",
        # the arguments summary, flattened; None is dropped
        "orion.tool.arguments.path": "src/app.py",
        "orion.tool.arguments.window.start": 1,
        "orion.tool.arguments.window.end": 40,
        "orion.tool.arguments.ranges": "[[1, 2], [5, 9]]",
        "orion.tool.arguments.tags": ("a", "b"),
        "session.id": CONVERSATION,
        "openinference.span.kind": "TOOL",
    }


def test_the_instrumentation_scope_is_orion_with_the_pinned_semconv_schema(pm, spans, tmp_path):
    store(pm, tmp_path, ev.tool_call(read_file(), at_ms=AT, duration_ms=1,
                                     conversation_id=CONVERSATION))
    [span] = spans.get_finished_spans()
    scope = span.instrumentation_scope
    assert (scope.name, scope.version, scope.schema_url) == (
        "orion", orion.__version__, SEMCONV_SCHEMA_URL)
    assert SEMCONV_SCHEMA_URL == "https://opentelemetry.io/schemas/1.44.0"


@pytest.mark.parametrize("kind", ["failed", "denied", "invalid_json"])
def test_a_tool_call_that_did_not_end_ok_is_an_error(pm, spans, tmp_path, kind):
    store(pm, tmp_path, ev.tool_call(read_file(ok=False, kind=kind), at_ms=AT, duration_ms=0,
                                     conversation_id=CONVERSATION))
    [span] = spans.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == kind
    assert span.attributes["orion.tool.outcome"] == kind
    assert span.attributes["error.type"] == kind
    assert span.start_time == span.end_time == AT_NS


def test_a_model_request_is_a_client_chat_span_with_token_usage(pm, spans, tmp_path):
    event = ev.model_request("gpt-4o", 3, Finish("tool_calls", "tool_calls"),
                             Usage(prompt_tokens=1200, completion_tokens=85, total_tokens=1285),
                             at_ms=AT, duration_ms=812.5, conversation_id=CONVERSATION)
    store(pm, tmp_path, event)
    [span] = spans.get_finished_spans()
    assert span.name == "chat gpt-4o"
    assert span.kind is SpanKind.CLIENT
    assert (span.start_time, span.end_time) == (AT_NS, AT_NS + 812_500_000)
    assert span.status.status_code is StatusCode.UNSET
    assert dict(span.attributes) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.response.finish_reasons": ("tool_calls",),
        "gen_ai.usage.input_tokens": 1200,
        "gen_ai.usage.output_tokens": 85,
        "gen_ai.conversation.id": CONVERSATION,
        "orion.request.number": 3,
        "orion.finish": "tool_calls",
        "orion.kind": "model_request",
        "session.id": CONVERSATION,
        "openinference.span.kind": "LLM",
    }


def test_a_model_request_without_usage_or_finish_reason(pm, spans, tmp_path):
    store(pm, tmp_path, ev.model_request("local", 1, Finish("truncated"), None, at_ms=AT,
                                         duration_ms=5, conversation_id=""))
    [span] = spans.get_finished_spans()
    assert span.attributes["gen_ai.response.finish_reasons"] == ("none",)
    assert "gen_ai.usage.input_tokens" not in span.attributes
    assert "gen_ai.conversation.id" not in span.attributes  # not set: not exported
    assert span.status.status_code is StatusCode.UNSET  # truncated is not a span error


def test_a_policy_denial(pm, spans, tmp_path):
    outcome = ToolOutcome("call_7", "write_file", False, "{}", "denied", {"path": "x"})
    store(pm, tmp_path, ev.policy_denial(outcome, "outside the workspace", "audit", at_ms=AT,
                                         conversation_id=CONVERSATION))
    [span] = spans.get_finished_spans()
    assert span.name == "deny write_file"
    assert span.kind is SpanKind.INTERNAL
    assert span.start_time == span.end_time == AT_NS
    assert span.status.status_code is StatusCode.UNSET
    assert dict(span.attributes) == {
        "gen_ai.tool.name": "write_file", "gen_ai.tool.call.id": "call_7",
        "gen_ai.conversation.id": CONVERSATION, "orion.kind": "policy_denial",
        "orion.policy.reason": "outside the workspace", "orion.policy.plugin": "audit",
        "session.id": CONVERSATION, "openinference.span.kind": "GUARDRAIL"}


def test_an_error_event_is_an_error_span_with_the_message(pm, spans, tmp_path):
    store(pm, tmp_path, ev.error("model", ConnectionError("reset by peer"), at_ms=AT,
                                 conversation_id=CONVERSATION, session_id="sess-1"))
    [span] = spans.get_finished_spans()
    assert span.name == "error in model"
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "ConnectionError"  # the type: a message may quote content
    [exception] = span.events
    assert (exception.name, dict(exception.attributes)) == (
        "exception", {"exception.type": "ConnectionError"})
    assert dict(span.attributes) == {
        "orion.where": "model", "orion.error": "ConnectionError: reset by peer",
        "error.type": "ConnectionError", "gen_ai.conversation.id": CONVERSATION,
        "orion.session.id": "sess-1", "orion.kind": "error", "session.id": CONVERSATION,
        "openinference.span.kind": "CHAIN"}


def test_a_message_left_out_is_its_length_and_hash_unless_the_batch_captured_it(pm, spans,
                                                                                 tmp_path):
    summary = {"$text": 15, "sha256": "ab12"}
    event = TraceEvent("error", "error in store", AT, attributes={
        "orion.where": "store", "orion.error": summary, "error.type": "ValueError"})
    store(pm, tmp_path, event)
    pm.hook.store_traces(events=[event], blobs={"ab12": "ValueError: bad"}, state_dir=tmp_path)
    plain, captured = spans.get_finished_spans()
    assert plain.status.description == "ValueError"
    assert (plain.attributes["orion.error.length"], plain.attributes["orion.error.sha256"]) == (
        15, "ab12")
    assert "orion.error" not in plain.attributes
    assert captured.status.description == "ValueError: bad"
    assert captured.attributes["orion.error"] == "ValueError: bad"
    assert dict(captured.events[0].attributes) == {"exception.type": "ValueError",
                                                   "exception.message": "ValueError: bad"}


CHART = """
statechart: review
initial: idle
states:
  idle: {}
  busy: {}
  done:
    final: true
transitions:
  - trigger: begin
    source: idle
    dest: busy
  - trigger: finish
    source: busy
    dest: done
"""


def test_a_lifecycle_transition_with_its_payload_flattened(pm, spans, tmp_path):
    class Transitions:
        def __init__(self):
            self.seen = []

        @orion.hookimpl
        def lifecycle_transition(self, lifecycle, transition):
            self.seen.append((lifecycle, transition))

    observer = Transitions()
    pm.register(observer, "transitions")
    path = tmp_path / "review.yaml"
    path.write_text(textwrap.dedent(CHART).lstrip(), encoding="utf-8")
    definition = load_definition(path, plugins=pm, env={})
    lifecycle = definition.create(clock=VirtualClock(AT), instance_id="lc-1")
    lifecycle.trigger("begin", path="a.txt", options={"mode": "fast", "retries": None},
                      sizes=[1, 2.5], flags=[True, False], nothing=None)
    [(lc, record)] = observer.seen

    store(pm, tmp_path, ev.transition(lc, record, CONVERSATION))
    [span] = spans.get_finished_spans()
    assert span.name == "review begin"
    assert span.start_time == AT_NS
    assert span.end_time == AT_NS + round(record.duration_ms * 1_000_000)
    assert dict(span.attributes) == {
        "orion.lifecycle": "review", "orion.event": "begin",
        "orion.source": "idle", "orion.dest": "busy",
        "orion.payload.path": "a.txt",
        "orion.payload.options.mode": "fast",
        "orion.payload.sizes": "[1, 2.5]",  # int and float mixed: JSON
        "orion.payload.flags": (True, False),
        "gen_ai.conversation.id": CONVERSATION,
        "orion.session.id": "lc-1",
        "orion.kind": "transition", "session.id": CONVERSATION,
        "openinference.span.kind": "CHAIN"}


def test_a_batch_is_one_root_span_per_event_in_order(pm, spans, tmp_path):
    events = [ev.tool_call(read_file(), at_ms=AT + i, duration_ms=1,
                           conversation_id=CONVERSATION) for i in range(3)]
    store(pm, tmp_path, *events)
    finished = spans.get_finished_spans()
    assert [s.start_time for s in finished] == [AT_NS + i * 1_000_000 for i in range(3)]
    assert all(s.parent is None for s in finished)
    assert len({s.context.trace_id for s in finished}) == 3


def test_a_bad_event_is_reported_and_does_not_stop_the_batch(pm, spans, tmp_path):
    bad = TraceEvent("tool_call", "execute_tool broken", "not a time")  # type: ignore[arg-type]
    good = ev.tool_call(read_file(), at_ms=AT, duration_ms=1, conversation_id=CONVERSATION)
    store(pm, tmp_path, bad, good)
    assert [s.name for s in spans.get_finished_spans()] == ["execute_tool read_file"]
    [failure] = [f for f in pm.failures if f.plugin == "otel-test"]
    assert failure.hook == "store_traces"
    assert failure.error.startswith("TypeError")


# -- attribute conversion ---------------------------------------------------------------------


def test_flatten():
    assert flatten({
        "s": "x", "b": True, "i": 3, "f": 0.5, "none": None,
        "d": {"a": {"b": 1, "c": None}, "e": {}},
        "strs": ["a", "b"], "ints": [1, 2], "bools": [True], "empty": [],
        "mixed": [1, "a"], "int_float": [1, 2.0], "bool_int": [True, 1], "with_none": ["a", None],
        "dicts": [{"k": "v"}], "huge": 2 ** 70, "huge_list": [2 ** 70],
        "summary": {"$text": 5000, "sha256": "ab12"},
        "nested": {"content": {"$bytes": 3, "sha256": "cd34"}},
        "other": object.__new__(type("Thing", (), {"__str__": lambda self: "thing"})),
    }) == {
        "s": "x", "b": True, "i": 3, "f": 0.5,
        "d.a.b": 1,
        "strs": ("a", "b"), "ints": (1, 2), "bools": (True,), "empty": (),
        "mixed": '[1, "a"]', "int_float": "[1, 2.0]", "bool_int": "[true, 1]",
        "with_none": '["a", null]', "dicts": '[{"k": "v"}]',
        "huge": str(2 ** 70), "huge_list": f"[{2 ** 70}]",
        # a text left out is its length and hash; the encoder's other values stay whole
        "summary.length": 5000, "summary.sha256": "ab12",
        "nested.content": '{"$bytes": 3, "sha256": "cd34"}',
        "other": "thing",
    }


def test_flatten_keeps_plain_strings_for_str_enums():
    value = flatten({"kind": ev.Kind.TOOL_CALL})["kind"]
    assert value == "tool_call" and type(value) is str


@pytest.mark.parametrize(("ms", "ns"), [
    (0, 0), (1.5, 1_500_000), (AT, AT_NS), (0.0004, 0),
    # a float of milliseconds since the epoch holds no more than microseconds
    (1_700_000_000_000.001, 1_700_000_000_000_001_000)])
def test_milliseconds_to_nanoseconds(ms, ns):
    assert to_ns(ms) == ns


# -- the built-in plugin ----------------------------------------------------------------------


def run_python(code: str, cwd) -> subprocess.CompletedProcess[str]:
    # In a scratch directory: the built-in SQLite store writes to the state directory given.
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=120, cwd=cwd)


@pytest.mark.slow
def test_the_builtin_exports_to_the_global_tracer_provider_set_after_loading(tmp_path):
    proc = run_python("""
        import json
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        from orion.hooks.manager import make_plugin_manager
        from orion.trace.events import TraceEvent

        pm = make_plugin_manager(entrypoints=False, env={})
        origin = pm.origins["orion_plugins.otel_exporter"]
        # before the application configured OpenTelemetry: the no-op tracer
        pm.hook.store_traces(events=[TraceEvent("recovery", "early", 1.0)], blobs={},
                             state_dir=".")
        spans = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(spans))
        trace.set_tracer_provider(provider)
        pm.hook.store_traces(events=[TraceEvent("recovery", "late", 2.0)], blobs={},
                             state_dir=".")
        print(json.dumps({"kind": origin.kind, "failures": len(pm.failures),
                          "spans": [s.name for s in spans.get_finished_spans()]}))
        """, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"kind": "builtin", "failures": 0, "spans": ["late"]}


BLOCK_BY_SYS_MODULES = "import sys; sys.modules['opentelemetry'] = None"
BLOCK_BY_FINDER = """
    import sys

    class NoOpenTelemetry:
        def find_spec(self, name, path=None, target=None):
            if name == "opentelemetry" or name.startswith("opentelemetry."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, NoOpenTelemetry())
    """


@pytest.mark.parametrize("block", [BLOCK_BY_SYS_MODULES, BLOCK_BY_FINDER],
                         ids=["sys.modules", "meta_path"])
def test_without_opentelemetry_the_module_is_unavailable(block, tmp_path):
    proc = run_python(textwrap.dedent(block) + textwrap.dedent("""
        import json
        try:
            import orion_plugins.otel_exporter
        except ImportError as exc:
            import orion.hooks.manager
            expected = getattr(orion.hooks.manager, "PluginUnavailable", None)
            print(json.dumps({"type": type(exc).__name__, "message": str(exc),
                              "is_orion_class": expected is None or isinstance(exc, expected),
                              "cause": type(exc.__cause__).__name__}))
        else:
            print("null")
        """), tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"type": "PluginUnavailable", "message": UNAVAILABLE,
                                       "is_orion_class": True,
                                       "cause": "ModuleNotFoundError"}


@pytest.mark.slow
def test_without_opentelemetry_orion_loads_its_other_builtins(tmp_path):
    import orion.hooks.manager

    if not hasattr(orion.hooks.manager, "PluginUnavailable"):
        pytest.skip("load_builtins does not skip unavailable built-ins yet")
    proc = run_python(BLOCK_BY_SYS_MODULES + textwrap.dedent("""
        import json
        from orion.hooks.manager import make_plugin_manager
        pm = make_plugin_manager(entrypoints=False, env={})
        print(json.dumps(sorted(name for name, _ in pm.list_name_plugin())))
        """), tmp_path)
    assert proc.returncode == 0, proc.stderr
    loaded = json.loads(proc.stdout)
    assert "orion_plugins.otel_exporter" not in loaded
    assert "orion_plugins.finalization" in loaded


def test_the_builtin_builds_nothing_until_a_tracer_provider_is_configured(tmp_path):
    # With OpenTelemetry installed but not configured, every span would be dropped: the
    # exporter says so and skips the batch; once a provider is set (or given), it exports.
    proc = run_python("""
        import json
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from orion_plugins.otel_exporter import OtelExporter, default_exporter

        before = default_exporter.configured()
        given = OtelExporter(TracerProvider()).configured()
        trace.set_tracer_provider(TracerProvider())
        print(json.dumps([before, given, default_exporter.configured()]))
        """, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [False, True, True]


# -- spans of a real runtime ------------------------------------------------------------------


def runtime_with(provider, model, workspace):
    from orion.runtime.runtime import Runtime

    pm = make_plugin_manager(entrypoints=False, env={}, blocked=["otel_exporter"])
    pm.register(OtelExporter(provider), "otel-test")
    return Runtime(model=model, plugins=pm, workspace=workspace, clock=VirtualClock(), env={})


def test_model_requests_are_llm_spans_with_the_response_and_a_failed_one_is_an_error(tmp_path):
    # The real OpenAI adapter against a loopback server: the second request is refused.
    import asyncio

    from sse_server import SSEServer, error, stream, text_stream

    from orion.errors import OrionError
    from orion.models.openai_compat import OpenAICompatibleModel

    exported = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exported))
    with SSEServer([stream(text_stream("Hi", usage=(5, 2))),
                    error(400, message="no such thing as zqxSECRETq")]) as server:
        model = OpenAICompatibleModel(model="test-model", base_url=server.base_url,
                                      api_key="k", max_retries=0)
        runtime = runtime_with(provider, model, tmp_path)
        asyncio.run(runtime.handle("hello"))
        with pytest.raises(OrionError):
            asyncio.run(runtime.handle("again"))
        runtime.close()
        port = server.port
    spans = exported.get_finished_spans()
    ok, failed = [s for s in spans if s.name == "chat test-model"]
    assert ok.kind is SpanKind.CLIENT and ok.status.status_code is StatusCode.UNSET
    assert {k: ok.attributes[k] for k in (
        "gen_ai.response.id", "gen_ai.response.model", "gen_ai.provider.name",
        "gen_ai.request.model", "server.address", "server.port",
        "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens")} == {
        "gen_ai.response.id": "chatcmpl-test", "gen_ai.response.model": "test-model",
        "gen_ai.provider.name": "openai", "gen_ai.request.model": "test-model",
        "server.address": "127.0.0.1", "server.port": port,
        "gen_ai.usage.input_tokens": 5, "gen_ai.usage.output_tokens": 2}
    # the failed request: an LLM span with status ERROR and its exception, under its turn
    assert failed.status.status_code is StatusCode.ERROR
    assert failed.status.description == "ModelError"
    assert failed.attributes["openinference.span.kind"] == "LLM"
    assert [(e.name, dict(e.attributes)) for e in failed.events] == [
        ("exception", {"exception.type": "ModelError"})]
    assert failed.end_time > failed.start_time
    roots = [s for s in spans if s.parent is None]
    assert [r.name for r in roots] == ["invoke_agent orion", "invoke_agent orion"]
    assert failed.parent.span_id == roots[1].context.span_id
    assert roots[1].status.status_code is StatusCode.ERROR
    assert ok.context.trace_id == roots[0].context.trace_id != roots[1].context.trace_id
    assert "zqxSECRETq" not in repr([dict(s.attributes) for s in spans])


def test_spans_keep_the_ids_parents_and_links_of_their_events(pm, spans, tmp_path):
    root = TraceEvent("turn", "invoke_agent orion", AT, CONVERSATION, "", {}, 5.0,
                      "a" * 32, "1" * 16, "")
    child = TraceEvent("tool_call", "execute_tool read_file", AT + 1, CONVERSATION, "s1", {}, 1.0,
                       "a" * 32, "2" * 16, "1" * 16, ("b" * 32 + "-" + "3" * 16,))
    store(pm, tmp_path, child, root)  # a child may be exported before its root
    by_name = {s.name: s for s in spans.get_finished_spans()}
    exported_root, exported_child = by_name["invoke_agent orion"], by_name[child.name]
    assert f"{exported_root.context.trace_id:032x}" == "a" * 32
    assert f"{exported_root.context.span_id:016x}" == "1" * 16
    assert exported_child.parent.span_id == exported_root.context.span_id
    assert f"{exported_child.context.span_id:016x}" == "2" * 16
    [link] = exported_child.links
    assert (f"{link.context.trace_id:032x}", f"{link.context.span_id:016x}") == (
        "b" * 32, "3" * 16)
