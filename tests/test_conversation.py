"""The conversation's request form and token total are kept as messages arrive (a request at
turn 2,000 does not rebuild every earlier message): they must always equal what the messages
say now, whatever happened to the list or to a message since the last request."""

from __future__ import annotations

import random

from orion.runtime.conversation import INTERRUPTED_NOTE, Budget, Conversation, Message


def fresh(messages: list[Message]) -> tuple[list[dict], int]:
    # What a conversation holding these messages, built from nothing, sends and counts.
    return [_wire(m) for m in messages], sum(_tokens(m) for m in messages)


def _wire(message: Message) -> dict:
    return Message(message.role, message.content, message.tool_calls, message.tool_call_id,
                   message.reasoning_content, message.injected).to_openai()


def _tokens(message: Message) -> int:
    return Message(message.role, message.content, message.tool_calls, message.tool_call_id,
                   message.reasoning_content).approx_tokens()


def assert_current(conversation: Conversation) -> None:
    assert (conversation.to_openai(), conversation.approx_tokens()) == fresh(conversation.messages)


def test_appended_messages_are_sent():
    conversation = Conversation()
    conversation.add_user("Write the guide.")
    assert_current(conversation)
    conversation.add_assistant("", tool_calls=[{"id": "c1", "type": "function",
                                               "function": {"name": "f", "arguments": "{}"}}])
    conversation.add_tool_result("c1", "ok")
    assert_current(conversation)
    assert [m["role"] for m in conversation.to_openai()] == ["user", "assistant", "tool"]


def test_a_message_changed_after_it_was_sent_is_sent_as_it_is_now():
    # A write's content in the history is replaced by a short reference once it is written.
    conversation = Conversation()
    conversation.add_user("Write it.")
    streamed = conversation.add_assistant("line\n" * 1000)
    conversation.add_user("Thanks.")
    before = conversation.approx_tokens()
    streamed.content = "(written to docs/guide.md: 1000 lines)"
    assert_current(conversation)
    assert conversation.approx_tokens() < before
    assert conversation.to_openai()[1]["content"] == "(written to docs/guide.md: 1000 lines)"


def test_reset_and_replaced_lists_start_again():
    conversation = Conversation()
    for word in ("one", "two", "three"):
        conversation.add_user(word)
    conversation.to_openai()
    conversation.reset()
    conversation.add_user("four")
    conversation.add_user("five")
    conversation.add_user("six")
    assert_current(conversation)
    assert [m["content"] for m in conversation.to_openai()] == ["four", "five", "six"]
    conversation.messages = conversation.messages[1:]  # as compaction replaces the list
    assert_current(conversation)


def test_the_request_list_is_the_callers_own():
    conversation = Conversation()
    conversation.add_user("a")
    sent = conversation.to_openai()
    sent.append({"role": "user", "content": "added by a caller"})
    assert conversation.to_openai() == [{"role": "user", "content": "a"}]


def test_the_budget_on_running_totals_agrees_with_the_budget_on_the_list():
    conversation = Conversation()
    for i in range(30):
        conversation.add_user("x" * (i * 10))
    for budget in (Budget(10, 0), Budget(0, 500), Budget(0, 10_000), Budget(0, 0)):
        assert budget.exceeded(len(conversation.messages), conversation.approx_tokens()) == \
            budget.exceeded_by(conversation.messages)


def test_the_request_starts_with_the_system_message_and_is_the_callers_own():
    conversation = Conversation()
    conversation.add_user("a")
    system = {"role": "system", "content": "Be brief."}
    sent = conversation.to_openai(system)
    assert sent == [system, {"role": "user", "content": "a"}]
    sent.append({"role": "user", "content": "added by a caller"})
    conversation.add_assistant("b")
    assert conversation.to_openai(system) == [system, {"role": "user", "content": "a"},
                                                     {"role": "assistant", "content": "b"}]
    assert len(sent) == 3 and sent[-1]["content"] == "added by a caller"


def _drop_oldest_turns(messages: list[Message], budget: Budget) -> list[Message] | None:
    # The rule the built-in compaction follows, the slow way: drop the oldest whole turn and
    # measure the rest again, until it fits or only the newest turn is left.
    starts = [i for i, m in enumerate(messages) if m.role == "user" and not m.injected]
    kept = list(messages)
    for start in starts[1:]:
        if not budget.exceeded_by(kept):
            break
        kept = messages[start:]
    return kept if len(kept) < len(messages) else None


def test_the_builtin_compaction_keeps_what_dropping_the_oldest_turns_one_by_one_keeps():
    from orion.hooks.manager import make_plugin_manager

    pm = make_plugin_manager(entrypoints=False, env={})
    rng = random.Random(16)
    for _ in range(300):
        conversation = Conversation()
        for _ in range(rng.randrange(0, 30)):
            kind = rng.choice(("user", "user", "assistant", "tool", "inject"))
            text = "x" * rng.randrange(0, 400)
            if kind == "user":
                conversation.add_user(text)
            elif kind == "inject":
                conversation.inject(text)
            elif kind == "tool":
                conversation.add_tool_result("c1", text)
            else:
                conversation.add_assistant(text)
        budget = Budget(rng.choice((0, 1, 3, 10, 25)), rng.choice((0, 20, 200, 1000, 5000)))
        messages = conversation.messages
        expected = _drop_oldest_turns(messages, budget)
        kept = pm.hook.compact_conversation(messages=list(messages), budget=budget)
        assert kept == expected


def test_lone_surrogates_anywhere_in_a_long_reply_are_sent_as_replacement_characters():
    # A streamed write's reply can be megabytes; a surrogate (a JSON \ud800 escape from the
    # model) may sit anywhere in it, alone or as a pair of halves.
    body = "Straße “quoted” 🙂\n" * 20_000
    for at in (0, 5, 65_535, 65_536, len(body) - 1, len(body)):
        for bad in ("\ud800", "\udfff", "\ud83d\ude42"):
            conversation = Conversation()
            conversation.add_assistant(body[:at] + bad + body[at:])
            sent = conversation.to_openai()[0]["content"]
            assert sent == body[:at] + "\ufffd" * len(bad) + body[at:]
    conversation = Conversation()
    conversation.add_assistant(body)
    assert conversation.to_openai()[0]["content"] == body


def test_a_stopped_reply_is_kept_as_it_arrived_and_marked_in_the_requests():
    conversation = Conversation()
    conversation.add_user("Explain it.")
    stopped = conversation.add_interrupted("First, the")
    conversation.add_user("Only the first part.")
    assert stopped.content == "First, the"  # the history keeps what the model sent
    assert [m["content"] for m in conversation.to_openai()] == [
        "Explain it.", f"First, the\n\n{INTERRUPTED_NOTE}", "Only the first part."]
    conversation.add_interrupted("")  # stopped before any text arrived
    assert conversation.to_openai()[-1] == {"role": "assistant", "content": INTERRUPTED_NOTE}
