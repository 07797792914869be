@write_session @protocol
Feature: Nothing the model streams is lost without a word
  The file a write session writes holds what the model streamed as content, by the rule the
  model was told in the prompt that asked for the text: the begin result, the idle prompt, the
  continuation request, the unfinished-line question. What a rule keeps out of the file is set
  aside, never dropped: the user sees at once how much and its first line, the model is told
  with the same figures and can put it back, the report says "N lines set aside", and
  `orion sessions show` prints it. The rules are listed in docs/write-sessions.md ("What is
  content").

  @WS-15
  Scenario: Text beside a tool call is set aside, announced, told to the model and never lost
    Given the workspace has a file "notes.md" containing "ship it on Friday\n"
    When the model begins to create "summary.md"
    And the model says "# Summary\nShip on Friday.\n" and calls "read_file" with:
      """
      {"path": "notes.md"}
      """
    Then the user is told "the text beside the read_file call (2 lines, first line '# Summary') was set aside, not written to summary.md (part 1)"
    And the prompt contains "the text you wrote beside your read_file call (2 lines, first line '# Summary') was set aside as part 1"
    And the prompt contains "call WritePlanTool_keep with part 1"
    And the write session is in state "awaiting_content"
    When the model replies "The end.\nDONE\n"
    Then the content of "summary.md" is "The end.\n"
    And the model is told "2 lines set aside, not written: part 1 (2 lines, first line '# Summary') beside a tool call"
    And the write session of "summary.md" is "written_with_set_aside"
    And the text set aside for "summary.md" is "# Summary\nShip on Friday.\n"
    And the conversation holds "# Summary\nShip on Friday."

  @WS-15 @WS-22
  Scenario: The model puts text set aside back with WritePlanTool_keep, where it was
    Given the workspace has a file "notes.md" containing "ship it on Friday\n"
    When the model begins to create "summary.md"
    And the model says "# Summary\nShip on Friday.\n" and calls "read_file" with:
      """
      {"path": "notes.md"}
      """
    And the model calls "WritePlanTool_keep" with:
      """
      {"part": 1}
      """
    Then the tool call succeeds
    When the model replies "The end.\nDONE\n"
    Then the content of "summary.md" is "# Summary\nShip on Friday.\nThe end.\n"
    And the write session of "summary.md" is "written"

  @WS-15
  Scenario: DONE beside a tool call ends the content: what precedes it is written
    Given the workspace has a file "notes.md" containing "ship it on Friday\n"
    When the model begins to create "summary.md"
    And the model says "# Summary\nShip on Friday.\nDONE\n" and calls "read_file" with:
      """
      {"path": "notes.md"}
      """
    Then the content of "summary.md" is "# Summary\nShip on Friday.\n"
    And the write session of "summary.md" is "written"

  @WS-15 @WS-22
  Scenario: A keep after more content has streamed puts the part back where it was, before the newer lines
    Given the workspace has a file "notes.md" containing "ship it on Friday\n"
    When the model begins to create "summary.md"
    And the model says "# Summary\nShip on Friday.\n" and calls "read_file" with:
      """
      {"path": "notes.md"}
      """
    And the model replies "The end.\n"
    And the model calls "WritePlanTool_keep" with:
      """
      {"part": 1}
      """
    Then the tool call succeeds
    When the model replies "DONE"
    Then the content of "summary.md" is "# Summary\nShip on Friday.\nThe end.\n"
    And the write session of "summary.md" is "written"

  @WS-16 @idle
  Scenario: A reply to the idle prompt without DONE is content, whatever its size
    When the model streams 3 lines to "docs/guide.md" without DONE
    And 2000 ms pass
    Then the model is asked to reply DONE
    And the prompt contains "Anything you write but DONE alone is added to the file"
    When the model streams 2 more lines without DONE
    And 2000 ms pass
    And the model replies "DONE"
    Then "docs/guide.md" holds the generated lines 1 to 5
    And the write session of "docs/guide.md" is "written"

  @WS-16 @idle
  Scenario: Lines the model sends again after the idle prompt are written again: nothing was quoted
    When the model streams 20 lines to "docs/guide.md" without DONE
    And 2000 ms pass
    And the model repeats the last 2 lines, then streams 10 more lines and DONE
    Then "docs/guide.md" has 32 lines
    And the write session of "docs/guide.md" is "written"

  @WS-16 @idle
  Scenario: A short reply to the idle prompt that says DONE in a sentence is content, not the answer DONE
    When the model streams 3 lines to "notes.md" without DONE
    And 2000 ms pass
    And the model replies "I am DONE with the file.\n"
    Then the write session is waiting for DONE or more content
    And "notes.md" does not exist
    When 2000 ms pass
    And the model replies "DONE"
    Then "notes.md" has 4 lines
    And "notes.md" contains "Line 3 of notes.md.\nI am DONE with the file.\n"
    And the write session of "notes.md" is "written"

  @WS-17
  Scenario: A message the user types while a session is open is held until the file is written
    When the model streams 2 lines to "docs/guide.md" without DONE
    And the user types "What is the capital of France?"
    Then the user is told "your message is held and sent to the model once the file is written"
    And the model is asked to reply DONE
    And the system prompt contains "The user sent a message meanwhile; you will see it once the file is written."
    And the conversation does not hold "What is the capital of France?"
    When the model replies "DONE"
    Then "docs/guide.md" holds the generated lines 1 to 2
    And the model is told "Created docs/guide.md (2 lines"
    And the conversation holds "What is the capital of France?"

  @WS-17
  Scenario: A held message is saved with the session: leaving says so, and continuing delivers it
    When the model streams 2 lines to "docs/guide.md" without DONE
    And the user types "What is the capital of France?"
    And the model replies with an empty message
    And Orion exits and starts again
    Then the user is told "1 message you typed is held with it ('What is the capital of France?') and sent once the file is written"
    When the user recovers the write session of "docs/guide.md" with --continue
    And Orion starts again
    Then the model is asked to continue
    When the model streams 3 more lines and DONE
    Then "docs/guide.md" holds the generated lines 1 to 5
    And the conversation holds "What is the capital of France?"

  @WS-18
  Scenario: Repeated DONE lines never land in the file
    When the model begins to create "todo.md"
    And the model replies "Task A\nTask B\nDONE\n\nDONE\n"
    Then the content of "todo.md" is "Task A\nTask B\n"
    And the write session of "todo.md" is "written"

  @WS-18 @WS-22
  Scenario: Text after the DONE line is set aside and counted in the report and the notice
    When the model begins to create "todo.md"
    And the model replies "Task A\nDONE\nTask B\nTask C\nThat is all."
    Then the content of "todo.md" is "Task A\n"
    And the model is told "3 lines set aside, not written: part 1 (3 lines, first line 'Task B') after DONE"
    And the user is told "the text after DONE (3 lines, first line 'Task B') was set aside, not written to todo.md"
    And the write session of "todo.md" is "written_with_set_aside"
    And the text set aside for "todo.md" is "Task B\nTask C\nThat is all."

  @WS-15 @WS-22
  Scenario: Two parts set aside are counted together in the report, and both are kept once the file is written
    Given the workspace has a file "notes.md" containing "ship it on Friday\n"
    When the model begins to create "summary.md"
    And the model says "Let me read the notes first.\n" and calls "read_file" with:
      """
      {"path": "notes.md"}
      """
    And the model replies "# Summary\nDONE\nThat is all.\nBye.\n"
    Then the content of "summary.md" is "# Summary\n"
    And the model is told "3 lines set aside, not written: part 1"
    When the user runs "orion sessions show <session>"
    Then the console shows "Let me read the notes first."
    And the console shows "That is all."

  @WS-19
  Scenario: A last line without a line break is the model's to decide
    When the model begins to create "VERSION"
    And the model replies "1.4.2"
    Then the model is asked whether the file ends in the middle of line 1
    And the model is not asked to continue
    When the model replies "DONE"
    Then the content of "VERSION" is "1.4.2"
    And the write session of "VERSION" is "written"

  @WS-19 @truncation
  Scenario: A message that ends in the middle of a line is asked about, and the line sent again replaces it
    When the model streams 200 lines to "docs/guide.md" and stops in the middle of the next line
    Then the model is asked whether the file ends in the middle of line 201
    And the user is told "the reply stopped in the middle of line 201 of docs/guide.md without DONE"
    When the model streams 50 more lines and DONE
    Then "docs/guide.md" holds the generated lines 1 to 250

  @WS-19
  Scenario: A reply that stops in the middle of a line again, after the unfinished-line question, is asked about again
    When the model begins to create "release.txt"
    And the model replies "version 1.4"
    Then the model is asked whether the file ends in the middle of line 1
    When the model replies "version 1.4.2\nrelease no"
    Then the model is asked whether the file ends in the middle of line 2
    When the model replies "release notes\nDONE\n"
    Then the content of "release.txt" is "version 1.4.2\nrelease notes\n"
    And the write session of "release.txt" is "written"

  @WS-19 @WS-22
  Scenario: A reply that does not send the unfinished line again takes its place, never glued to it
    When the model begins to create "notes.txt"
    And the model replies "First line.\nSomething else!"
    And the model replies "Second line.\nDONE\n"
    Then the content of "notes.txt" is "First line.\nSecond line.\n"
    And the text set aside for "notes.txt" is "Something else!"
    And the write session of "notes.txt" is "written_with_set_aside"

  @WS-19 @WS-22
  Scenario: A reply that goes on from the middle of an unfinished line is not glued to it; the old start is set aside
    When the model begins to create "snippet.txt"
    And the model replies "def smaller(a, b):\n    return min"
    Then the model is asked whether the file ends in the middle of line 2
    When the model replies "(a, b)\nDONE\n"
    Then the content of "snippet.txt" is "def smaller(a, b):\n(a, b)\n"
    And the text set aside for "snippet.txt" is "    return min"
    And the write session of "snippet.txt" is "written_with_set_aside"

  @WS-20 @idle
  Scenario: After max_idle_prompts prompts without new content or DONE the file is written as incomplete
    When the model streams 5 lines to "docs/guide.md" without DONE
    And 2000 ms pass
    And the model replies with an empty message
    And 2000 ms pass
    And the model replies with an empty message
    And 2000 ms pass
    And the model replies with an empty message
    Then the write session of "docs/guide.md" is "incomplete"
    And "docs/guide.md" holds the generated lines 1 to 5
    And the user is told "no DONE after 3 idle prompts: writing docs/guide.md as incomplete (5 lines)"
    And the model is told "(incomplete: no DONE after 3 idle prompts)"
    When 10 minutes pass
    Then the model is not asked to reply DONE

  @WS-20 @idle
  Scenario: New content sets the count of idle prompts back, so a model that keeps writing is never cut short
    When the model streams 5 lines to "docs/guide.md" without DONE
    And 2000 ms pass
    And the model streams 5 more lines without DONE
    And 2000 ms pass
    And the model streams 5 more lines without DONE
    And 2000 ms pass
    And the model replies with an empty message
    Then the write session is waiting for DONE or more content
    When 2000 ms pass
    And the model replies "DONE"
    Then "docs/guide.md" holds the generated lines 1 to 15
    And the write session of "docs/guide.md" is "written"

  @WS-20 @WS-17 @idle
  Scenario: The idle timer never asks again while the model is still answering its prompt
    When the model streams 3 lines to "docs/guide.md" without DONE
    And the user types "Is it done yet?"
    Then the model is asked to reply DONE
    When the model has streamed 2 more lines so far
    And 10 seconds pass
    And the model streams 1 more line and DONE
    Then "docs/guide.md" holds the generated lines 1 to 6
    And the model was asked to reply DONE once

  @WS-20 @config
  Scenario: max_idle_prompts is a setting
    Given the "write_session" setting "max_idle_prompts" is 1
    When the model streams 5 lines to "docs/guide.md" without DONE
    And 2000 ms pass
    And the model replies with an empty message
    Then the write session of "docs/guide.md" is "incomplete"
    And "docs/guide.md" holds the generated lines 1 to 5

  @WS-21 @truncation
  Scenario: A stream the network cut mid-reply is a cut-off: what arrived is kept and continued
    When the model streams 30 lines to "docs/guide.md" and is cut off with finish reason "connection_lost"
    Then the journal of "docs/guide.md" holds 30 lines on disk
    And the user is told "the connection broke in the middle of the reply while write session"
    And the model is asked to continue
    When the model streams 5 more lines and DONE
    Then "docs/guide.md" holds the generated lines 1 to 35

  @WS-21 @truncation
  Scenario: An error event in the stream is a cut-off named to the user with the file and the session
    When the model streams 30 lines to "docs/guide.md" and is cut off with finish reason "error"
    Then the user is told "the endpoint reported an error in the middle of the reply"
    And the user is told "writing docs/guide.md: what arrived is kept (30 lines), taken as cut off"
    And the model is asked to continue
    When the model streams 5 more lines and DONE
    Then "docs/guide.md" holds the generated lines 1 to 35

  @WS-21 @truncation
  Scenario: A DONE line that arrived before an error event finishes the file
    When the model begins to create "notes.txt"
    And the model replies "alpha\nbeta\nDONE\n" with finish reason "error"
    Then the content of "notes.txt" is "alpha\nbeta\n"
    And the model is not asked to continue

  @WS-21 @truncation
  Scenario: A content filter that stops the reply is a cut-off named to the user
    When the model streams 12 lines to "docs/guide.md" and is cut off with finish reason "content_filter"
    Then the user is told "the endpoint's content filter stopped the reply (finish reason content_filter) while write session"
    And the model is asked to continue

  @WS-23
  Scenario: A leading think block is reasoning, never content, with the DONE lines it holds; it is set aside, not dropped
    When the model begins to create "notes.txt"
    And the model replies "<think>\nThe file ends with a line\nDONE\n</think>\n\nalpha\nbeta\nDONE\n"
    Then the content of "notes.txt" is "alpha\nbeta\n"
    And the user is told "the reasoning at the start of the reply (5 lines, first line '<think>') was set aside, not written to notes.txt (part 1)"
    And the text set aside for "notes.txt" is "<think>\nThe file ends with a line\nDONE\n</think>\n\n"
    And the write session of "notes.txt" is "written_with_set_aside"

  @WS-23
  Scenario: A think block after a blank line, its end split between two chunks, is reasoning too
    When the model begins to create "notes.txt"
    And the model replies in the chunks "\n<think>\nDONE\n</th", "ink>\nalpha\n" and "DONE\n"
    Then the content of "notes.txt" is "alpha\n"
    And the text set aside for "notes.txt" is "\n<think>\nDONE\n</think>\n"
    And the write session of "notes.txt" is "written_with_set_aside"

  @WS-23 @WS-22
  Scenario: A file that starts with a think element is put back whole with WritePlanTool_keep
    When the model begins to create "fixture.xml"
    And the model replies "<think>\n  <step>Read the input.</step>\n</think>\n<answer/>\n"
    Then the user is told "the reasoning at the start of the reply (3 lines, first line '<think>') was set aside"
    When 2000 ms pass
    Then the prompt contains "taken for reasoning and set aside as part 1"
    When the model calls "WritePlanTool_keep" with:
      """
      {"part": 1}
      """
    Then the tool call succeeds
    When the model replies "DONE"
    Then the content of "fixture.xml" is "<think>\n  <step>Read the input.</step>\n</think>\n<answer/>\n"
    And the write session of "fixture.xml" is "written"

  @WS-23
  Scenario: Reasoning holds DONE lines without ending the content
    When the model begins to create "notes.txt"
    And the model thinks "The file ends with a line\nDONE\n" and replies "alpha\nDONE\n"
    Then the content of "notes.txt" is "alpha\n"
