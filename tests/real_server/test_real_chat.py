"""``orion chat`` against a real OpenAI-compatible server running a real model (SmolLM2-135M on
llama.cpp's server, on loopback), through the real ``openai`` SDK: the lane ``make test-real``
runs. What the model says is its own; what is checked is what Orion does with it."""

from __future__ import annotations

import json

from lane import RealServer, orion_chat, post_lines

SMALL = "model:\n  max_tokens: 48\n  temperature: 0\n"


def test_a_plain_reply_arrives_and_the_chat_ends_cleanly(real_server: RealServer, tmp_path):
    done = orion_chat(tmp_path, real_server.base_url, "Say hello.\n/quit\n", orion_yaml=SMALL)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip(), done.stderr
    assert "error" not in done.stderr.lower(), done.stderr


def test_a_reply_cut_by_max_tokens_says_so(real_server: RealServer, tmp_path):
    done = orion_chat(tmp_path, real_server.base_url, "Tell me a long story about a cat.\n",
                      orion_yaml="model:\n  max_tokens: 4\n  temperature: 0\n")
    assert done.returncode == 0, done.stderr
    said = done.stdout + done.stderr
    assert "cut by the output limit (finish reason length)" in said, said


def test_a_message_past_the_context_window_is_named_and_the_chat_goes_on(own_server, tmp_path):
    long = "word " * 700  # past the 512 tokens of this server's window
    done = orion_chat(tmp_path, own_server.base_url, f"{long}\nSay hi.\n", orion_yaml=SMALL)
    said = done.stdout + done.stderr
    assert "does not fit the model's context window of 512 tokens" in said, said
    assert "/compact" in said
    # the window learned from the error: the next request is compacted to fit, and answered
    assert "compacted the conversation" in said, said
    assert said.count("does not fit") == 1, said


def test_a_killed_server_is_named_and_nothing_hangs(own_server: RealServer, tmp_path):
    own_server.kill()
    done = orion_chat(tmp_path, own_server.base_url, "Say hello.\n", orion_yaml=SMALL)
    said = done.stdout + done.stderr
    assert f"cannot connect to the model endpoint at {own_server.base_url}" in said, said
    assert "check the base URL and that the server is running" in said


def test_the_server_caches_the_prefix_of_a_conversation(real_server: RealServer):
    """Two requests of one conversation: the second re-reads only what is new (the server's
    ``timings.cache_n`` counts the prompt tokens it took from its cache)."""
    history = [{"role": "system", "content": "You are brief. " * 20},
               {"role": "user", "content": "Name a colour."}]

    def cached(messages: list[dict]) -> int:
        body = {"model": "smollm2", "messages": messages, "stream": True, "max_tokens": 4,
                "temperature": 0}
        _, lines = post_lines(f"{real_server.base_url}/chat/completions", body)
        timings = [json.loads(line[6:]).get("timings") for line in lines
                   if line.startswith("data: {")]
        return int([t for t in timings if t][-1]["cache_n"])
    cached(history)
    history += [{"role": "assistant", "content": "Blue."},
                {"role": "user", "content": "Another one."}]
    assert cached(history) >= 60
