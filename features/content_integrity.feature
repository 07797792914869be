@write_session @protocol
Feature: Nothing but the content, all of the content
  The file a write session writes holds exactly what the model streamed as content, or the
  user is told plainly that it does not. Narration beside a tool call, answers to Orion's
  prompts and to the user's own messages never land in it; a DONE line of the document does
  not cut it short; a cut-off that a gateway reports as "stop" is continued; a model that never
  says DONE is not asked forever; a dropped connection is a cut-off. The rules are listed in
  docs/write-sessions.md ("What is content").

  @WS-16 @idle
  Scenario: A reply to the idle prompt without DONE is an answer and is never appended
    When the model streams 3 lines to "docs/guide.md" without DONE
    And 2000 ms pass
    Then the model is asked to reply DONE
    When the model replies "I have finished writing the file."
    Then the user is told "the reply did not end with a line DONE, so it was not written to docs/guide.md"
    When 2000 ms pass
    Then the prompt contains "Your last reply did not end with a line DONE, so it was not added to the file."
    When the model replies "DONE"
    Then "docs/guide.md" holds the generated lines 1 to 3
    And "docs/guide.md" does not contain "finished"
    And the conversation holds "I have finished writing the file."

  @WS-16 @WS-19
  Scenario: A reply is never glued onto a line that ended mid-way
    When the model begins to create "notes.md"
    And the model replies "First line.\nSomething else!"
    Then the model is asked to continue
    When the model replies "Yes, I am done."
    And 2000 ms pass
    And the model replies "DONE"
    Then the content of "notes.md" is "First line.\nSomething else!"

  @WS-15
  Scenario: Text beside a tool call is narration, never content
    Given the workspace has a file "notes.md" containing "ship it on Friday\n"
    When the model begins to create "summary.md"
    And the model says "Let me check the notes first." and calls "read_file" with:
      """
      {"path": "notes.md"}
      """
    Then the user is told "the text beside the tool call (1 line) was not written to summary.md"
    And the write session is in state "awaiting_content"
    When the model replies "Ship on Friday.\nDONE\n"
    Then the content of "summary.md" is "Ship on Friday.\n"
    And the conversation holds "Let me check the notes first."

  @WS-17
  Scenario: A message the user types while a session is open is held, and its answer never becomes content
    When the model streams 2 lines to "docs/guide.md" without DONE
    And the user types "What is the capital of France?"
    Then the user is told "your message is held and sent to the model once the file is written"
    And the model is asked to reply DONE
    And the system prompt contains "The user sent a message meanwhile; you will see it once the file is written."
    When the model replies "Paris."
    Then "docs/guide.md" does not exist
    When 2000 ms pass
    And the model replies "DONE"
    Then "docs/guide.md" holds the generated lines 1 to 2
    And "docs/guide.md" does not contain "Paris"
    And the model is told "Created docs/guide.md (2 lines"
    And the conversation holds "What is the capital of France?"

  @WS-18
  Scenario: Earlier DONE lines are content when another DONE line follows in the same message
    When the model begins to create "todo.md"
    And the model streams:
      """
      Task A
      DONE
      Task B
      Task C
      DONE
      """
    Then the content of "todo.md" is "Task A\nDONE\nTask B\nTask C\n"

  @WS-18
  Scenario: Lines after the last DONE are counted in the report and the notice, never dropped silently
    When the model begins to create "todo.md"
    And the model replies "Task A\nDONE\nTask B\nTask C\nThat is all."
    Then the content of "todo.md" is "Task A\n"
    And the model is told "3 lines after DONE were not written; the trace records them as commentary, by size and hash"
    And the user is told "todo.md: 3 lines after DONE were not written"
    And the trace holds the sha256 of "Task B\nTask C\nThat is all."

  @WS-19 @truncation
  Scenario: A message that ends in the middle of a line without DONE is a cut-off, whatever its finish reason
    When the model streams 200 lines to "docs/guide.md" and stops in the middle of the next line
    Then the model is asked to continue
    And the model is not asked to reply DONE
    And the user is told "the reply ended in the middle of a line without DONE: taken as cut off"
    When the model streams 50 more lines and DONE
    Then "docs/guide.md" holds the generated lines 1 to 250

  @WS-19 @idle
  Scenario: What a reply to the idle prompt repeats of the saved lines is dropped
    When the model streams 20 lines to "docs/guide.md" without DONE
    And 2000 ms pass
    And the model repeats the last 2 lines, then streams 10 more lines and DONE
    Then "docs/guide.md" holds the generated lines 1 to 30

  @WS-20 @idle
  Scenario: After max_idle_prompts prompts without new content or DONE the file is written as incomplete
    When the model streams 5 lines to "docs/guide.md" without DONE
    And 2000 ms pass
    And the model replies "Still working on it."
    And 2000 ms pass
    And the model replies "Still working on it."
    And 2000 ms pass
    And the model replies "Still working on it."
    Then the write session of "docs/guide.md" is "incomplete"
    And "docs/guide.md" holds the generated lines 1 to 5
    And the user is told "no DONE after 3 idle prompts: writing docs/guide.md as incomplete (5 lines)"
    And the model is told "(incomplete: no DONE after 3 idle prompts)"
    When 10 minutes pass
    Then the model is not asked to reply DONE

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
    And the user is told "the connection broke in the middle of the reply"
    And the model is asked to continue
    When the model streams 5 more lines and DONE
    Then "docs/guide.md" holds the generated lines 1 to 35
