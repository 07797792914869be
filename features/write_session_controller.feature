@write_session @adr_2026_01_04
Feature: Large files are written through a write session
  The model opens a write session with a small call that names the file and the operation,
  then sends the file's content as its ordinary text and ends it with a line DONE (after a
  pause without DONE, Orion asks whether it is finished). Orion checks the content, asks for
  corrections if needed, and writes the file once. No tool call ever carries the content.
  Rules: docs/design/write-session-controller.md (WS-1 to WS-14)

  # -- Why: tool calls that break --------------------------------------------------------------

  @tools @context @WS-2
  Scenario: Tool-call arguments that are cut off are refused as invalid JSON, never run with empty arguments
    When the model calls "WritePlanTool_begin" with the raw arguments '{"intent": "guide", "target_file": "docs/guide.md", "operation": "cre'
    Then the tool call is refused as "invalid_json"
    And no write session is open
    And "docs/guide.md" does not exist
    And no write session directory is left

  @tools @context @WS-2
  Scenario: Empty tool-call arguments are refused as invalid JSON, never run as no arguments
    When the model calls "WritePlanTool_begin" with the raw arguments ''
    Then the tool call is refused as "invalid_json"
    And the tool call is refused with a message containing "are empty"
    And no write session is open

  @trace @context @WS-12
  Scenario: Trace events stay JSON even when a tool call fails
    Given the workspace has a file "docs/a.md" with 3 lines
    When the model begins to create "docs/a.md"
    Then the tool call is refused with a message containing "already exists"
    And the trace records "execute_tool WritePlanTool_begin"
    And every trace event is JSON

  @trace @WS-12
  Scenario: Values JSON cannot hold are stored as JSON in the trace
    When the model begins to create "notes.txt"
    And a plugin records a trace event with the values NaN, infinity and bytes
    Then the trace records "plugin measurement"
    And every trace event is JSON

  # -- Decision and protocol -----------------------------------------------------------------

  @tools @protocol @WS-1
  Scenario: The begin call carries only the intent, the target file and the operation
    When the user says "Write the guide."
    Then the tool "WritePlanTool_begin" takes "intent", "target_file" and "operation"
    And the tool "WritePlanTool_begin" has no parameter "content"
    And no advertised tool has a parameter "raw_content"

  @protocol @tools @WS-3
  Scenario: Begin opens a write session and tells the model to end the content with DONE
    When the model begins to create "docs/guide.md"
    Then the tool call succeeds
    And the tool result says "stage" is "awaiting_content"
    And the tool result says "target_file" is "docs/guide.md"
    And the tool result says "operation" is "create"
    And the model is told "end it with a line that is exactly DONE"
    And a write session is open for "docs/guide.md"
    And the write session is waiting for content

  @protocol @WS-4
  Scenario: The content is the model's plain text and never part of a tool call
    When the model streams 250 lines to "docs/guide.md" and DONE
    Then "docs/guide.md" holds the generated lines 1 to 250
    And the model made 1 tool call
    And the conversation does not hold "Line 125 of docs/guide.md."
    And the conversation holds "[wrote docs/guide.md: 250 lines, sha256 "

  @protocol @WS-5
  Scenario: A line DONE finalizes at once, without waiting for the idle timer
    When the model streams 250 lines to "docs/guide.md" and DONE
    Then "docs/guide.md" has 250 lines
    And the model is told "Created docs/guide.md (250 lines"
    And no write session is open
    When 2000 ms pass
    Then the model is not asked to reply DONE

  @protocol @WS-5
  Scenario: DONE must be a line of its own; spaces after it count, "DONE." and "Done" are content
    When the model begins to create "notes.txt"
    And the model replies "First line.\nDONE.\nDone\nThe word DONE in a sentence.\nDONE \t\nafter"
    Then the content of "notes.txt" is:
      """
      First line.
      DONE.
      Done
      The word DONE in a sentence.
      """

  @protocol @WS-5
  Scenario: An indented DONE is content: only DONE from the line's first character ends it
    When the model begins to create "state.c"
    And the model replies "enum state {\n    RUNNING,\n    DONE\n};\n\tDONE\n /* end */\nDONE\n"
    Then the content of "state.c" is:
      """
      enum state {
          RUNNING,
          DONE
      };
      	DONE
       /* end */
      """
    And the write session of "state.c" is "written"

  @protocol @WS-5
  Scenario: A line "DONE." in the middle of the content is content, and so is what follows it
    When the model begins to create "notes.txt"
    And the model replies "Step one.\nDONE.\nStep two.\nDONE\n"
    Then the content of "notes.txt" is "Step one.\nDONE.\nStep two.\n"
    And the write session of "notes.txt" is "written"

  @protocol @WS-5 @WS-19
  Scenario: A message that ends with a line "DONE." has not ended the content
    When the model begins to create "notes.txt"
    And the model replies "Step one.\nDONE."
    Then the model is asked whether the file ends in the middle of line 2
    And "notes.txt" does not exist
    When the model replies "DONE"
    Then the content of "notes.txt" is "Step one.\nDONE."

  @protocol @WS-5
  Scenario: A DONE split across streamed chunks is still detected
    When the model begins to create "notes.txt"
    And the model replies in the chunks "alpha\nbeta\nDO", "N" and "E\n"
    Then the content of "notes.txt" is "alpha\nbeta\n"

  @protocol @WS-5
  Scenario: DONE is detected after Windows line breaks too, and stripped
    When the model begins to create "notes.txt"
    And the model replies "alpha\r\nbeta\r\nDONE\r\n"
    Then the content of "notes.txt" is "alpha\r\nbeta\r\n"

  @protocol @WS-5
  Scenario: DONE at the very end of a message, without a line break, ends the content
    When the model begins to create "notes.txt"
    And the model replies "alpha\nbeta\nDONE"
    Then the content of "notes.txt" is "alpha\nbeta\n"

  @protocol @WS-5
  Scenario: Text after the DONE line is never content
    When the model begins to create "notes.txt"
    And the model replies "alpha\nDONE\nI wrote the notes for you."
    Then the content of "notes.txt" is "alpha\n"
    And the trace records "text set aside"
    And the conversation holds "I wrote the notes for you."

  @protocol @fences @WS-6
  Scenario: A DONE line inside a fenced code block is content
    When the model begins to create "docs/protocol.md"
    And the model streams:
      """
      # The protocol
      End the content with this line:
      ```text
      DONE
      ```
      That is all.
      DONE
      """
    Then the content of "docs/protocol.md" is:
      """
      # The protocol
      End the content with this line:
      ```text
      DONE
      ```
      That is all.
      """

  @protocol @fences @WS-6
  Scenario: A message that ends after a DONE line inside a fenced code block leaves the session open
    When the model begins to create "docs/protocol.md"
    And the model streams:
      """
      # The protocol
      End the content with this line:
      ```text
      DONE
      ```
      """
    Then a write session is open for "docs/protocol.md"
    When the model streams:
      """
      That is all.
      DONE
      """
    Then the content of "docs/protocol.md" is:
      """
      # The protocol
      End the content with this line:
      ```text
      DONE
      ```
      That is all.
      """

  @protocol @fences @WS-6
  Scenario: In a Markdown-wrapped file fences nest, so the document's own DONE line is content
    When the model begins to create "docs/protocol.md"
    And the model streams:
      """
      ```markdown
      # The protocol
      ```sh
      orion run script.yaml
      ```
      End the content with this line:
      DONE
      That is all.
      ```
      DONE
      """
    Then the content of "docs/protocol.md" is:
      """
      # The protocol
      ```sh
      orion run script.yaml
      ```
      End the content with this line:
      DONE
      That is all.
      """

  @protocol @fences @WS-6
  Scenario: A final DONE inside a wrapper fence the model never closed still ends the content
    When the model begins to create "docs/wrapped.md"
    And the model streams:
      """
      ```markdown
      # Title
      ```sh
      echo hi
      ```
      More text.
      DONE
      """
    Then "docs/wrapped.md" exists
    And "docs/wrapped.md" does not contain "DONE"
    And no write session is open

  @protocol @fences @WS-6
  Scenario: A fence of tildes keeps its DONE line too
    When the model begins to create "docs/protocol.md"
    And the model replies "End the content with this line:\n~~~\nDONE\n~~~\nThat is all.\nDONE\n"
    Then the content of "docs/protocol.md" is "End the content with this line:\n~~~\nDONE\n~~~\nThat is all.\n"

  @protocol @idle @WS-7
  Scenario: A message without DONE gets the idle prompt after 2000 ms and not before
    When the model streams 250 lines to "docs/guide.md" without DONE
    Then the model is not asked anything
    When 1999 ms pass
    Then the model is not asked anything
    When 1 ms passes
    Then the model is asked to reply DONE
    And the prompt contains "If you're finished, reply with DONE on its own line; otherwise continue."
    When the model replies "DONE"
    Then "docs/guide.md" has 250 lines
    And no file outside the workspace changed

  @protocol @idle @WS-7
  Scenario: After the idle prompt, more content continues the same file
    When the model streams 100 lines to "docs/guide.md" without DONE
    And 2000 ms pass
    Then the model is asked to reply DONE
    When the model streams 50 more lines and DONE
    Then "docs/guide.md" holds the generated lines 1 to 150
    And one write session was begun

  @protocol @idle @WS-7
  Scenario: Every pause starts the idle timer again
    When the model streams 10 lines to "docs/guide.md" without DONE
    And 1500 ms pass
    Then the model is not asked anything
    When the model streams 10 more lines without DONE
    And 1999 ms pass
    Then the model is not asked anything
    When 1 ms passes
    Then the model is asked to reply DONE

  @protocol @idle @WS-7
  Scenario: An empty reply to the idle prompt waits for DONE again
    When the model streams 20 lines to "docs/guide.md" without DONE
    And 2000 ms pass
    Then the model is asked to reply DONE
    When the model replies with an empty message
    Then a write session is open for "docs/guide.md"
    When 2000 ms pass
    Then the model is asked to reply DONE
    When the model replies "DONE"
    Then "docs/guide.md" holds the generated lines 1 to 20

  @protocol @idle @WS-7
  Scenario: DONE stops the idle timer
    When the model streams 20 lines to "docs/guide.md" without DONE
    And 1000 ms pass
    And the model streams 5 more lines and DONE
    Then "docs/guide.md" holds the generated lines 1 to 25
    When 5000 ms pass
    Then the model is not asked to reply DONE

  # -- Design: the controller, the state machine ---------------------------------------------

  @design @WS-4
  Scenario: Orion, not a tool, collects the content and finds its end
    When the model streams 30 lines to "docs/guide.md" without DONE
    And 2000 ms pass
    And the model replies "DONE"
    Then "docs/guide.md" holds the generated lines 1 to 30
    And the model made 1 tool call

  @design @WS-4
  Scenario: A message with only tool calls does not touch the open session
    When the model begins to create "notes.txt"
    And the model calls "read_file" with the arguments:
      | path | README.md |
    Then a write session is open for "notes.txt"
    And the write session is waiting for content
    When the model replies "alpha\nDONE\n"
    Then the content of "notes.txt" is "alpha\n"

  @state_machine @WS-9
  Scenario: A session goes from waiting for content to waiting for DONE to written
    When the model streams 40 lines to "docs/guide.md" without DONE
    Then the write session is waiting for DONE or more content
    When 2000 ms pass
    And the model replies "DONE"
    Then the write session is written
    And the write session went from not started to waiting for content to waiting for DONE or more content to checking the content to written

  @state_machine @validation @WS-9 @WS-10
  Scenario: A session with invalid content waits for corrections
    When the model writes "fine\nbad \x00 byte" to "notes.txt"
    Then the write session is waiting for corrections
    When the model corrects line 2 to "bad byte"
    Then the write session went from checking the content to waiting for corrections to checking the content to written

  # -- Validation and repair loop ------------------------------------------------------------

  @validation @WS-10
  Scenario: The content is checked as UTF-8 before anything is written
    When the model writes "caf\xe9 au lait" to "menu.txt"
    Then the model is asked for corrections of line 1
    And the prompt contains "L1: caf\\xe9 au lait"
    And "menu.txt" does not exist

  @validation @WS-10
  Scenario: Every invalid position is sent in one prompt, with its context
    When the model writes "ok\nbad \x00 one\nfine\nbad \x07 two" to "notes.txt"
    Then the model is asked 1 time
    And the model is asked for corrections
    And the prompt contains "2 problems on 2 lines"
    And the prompt contains "L2: bad \\x00 one"
    And the prompt contains "L4: bad \\x07 two"

  @validation @WS-10
  Scenario: An edit is checked too, as the file it makes, before the file is touched
    Given the workspace has a file "notes.txt" with 3 lines
    When the model begins to append "notes.txt"
    And the model replies "bad \x00 byte\nDONE\n"
    Then the model is asked for corrections of line 1
    And the prompt contains "L1: bad \\x00 byte"
    And "notes.txt" is unchanged

  @validation @WS-11
  Scenario: A correction round that fixes the lines writes the file once
    When the model writes "ok\nbad \x00 one" to "notes.txt"
    Then "notes.txt" does not exist
    When the model corrects line 2 to "good one"
    Then the content of "notes.txt" is "ok\ngood one\n"
    And the write session has 1 correction round
    And the model is told "Created notes.txt (2 lines"

  @validation @WS-11
  Scenario: After 3 correction rounds the safe replacement removes what is still invalid
    When the model writes "ok\nbad \x00 byte" to "notes.txt"
    And the model corrects line 2 to "still \x07 bad"
    And the model corrects line 2 to "still \x07 bad"
    Then "notes.txt" does not exist
    When the model corrects line 2 to "still \x07 bad"
    Then the model is not asked for corrections
    And the content of "notes.txt" is "ok\nstill  bad\n"
    And the write session has 3 correction rounds
    And the user is told "the safe replacement changed 1 place(s)"
    And the model is told "the safe replacement changed 1 place(s)"

  @validation @WS-11
  Scenario: The prompt of the last round says that what remains is removed
    Given the "write_session" setting "max_corrections" is 1
    When the model writes "ok\nbad \x00 byte" to "notes.txt"
    Then the prompt contains "Correction round 1 of 1"
    And the prompt contains "This is the last round"

  @validation @WS-11
  Scenario: A rule that blocks the write and is still broken after the last round leaves the file unwritten and the content kept
    Given a validator "licence-header" blocks a write of ".md" files whose first line is not "<!-- SPDX-License-Identifier: Apache-2.0 -->"
    When the model writes "# Guide\nHow to use it." to "docs/guide.md"
    Then the prompt contains "[licence-header, blocks the write]"
    When the model corrects line 1 to "# Guide"
    And the model corrects line 1 to "# Guide"
    And the model corrects line 1 to "# Guide"
    Then the model is not asked for corrections
    And "docs/guide.md" does not exist
    And the write session of "docs/guide.md" is "blocked"
    And the user is told "docs/guide.md was not written: 1 issue(s) that block a write remain after 3 correction rounds"
    And the model is told "The file is as it was; its content stays in write session"
    And the journal of "docs/guide.md" holds 2 lines on disk
    When the model replies "Understood."
    And the user says "And now?"
    And the model replies "Nothing more to write."
    Then no error occurred

  @validation @WS-11
  Scenario: A rule that blocks the write, kept in a correction round, writes the file
    Given a validator "licence-header" blocks a write of ".md" files whose first line is not "<!-- SPDX-License-Identifier: Apache-2.0 -->"
    When the model writes "# Guide\nHow to use it." to "docs/guide.md"
    And the model corrects line 1 to "<!-- SPDX-License-Identifier: Apache-2.0 -->"
    Then the content of "docs/guide.md" is "<!-- SPDX-License-Identifier: Apache-2.0 -->\nHow to use it.\n"
    And the write session of "docs/guide.md" is "written"

  # -- Configuration ---------------------------------------------------------------------------

  @config @idle @WS-8
  Scenario: WRITE_SESSION_IDLE_MS sets the idle time
    Given the environment variable "WRITE_SESSION_IDLE_MS" is "500"
    When the model streams 10 lines to "docs/guide.md" without DONE
    And 499 ms pass
    Then the model is not asked anything
    When 1 ms passes
    Then the model is asked to reply DONE

  @config @idle @WS-8
  Scenario: idle_ms in orion.yaml sets the idle time too
    Given the "write_session" setting "idle_ms" is 3000
    When the model streams 10 lines to "docs/guide.md" without DONE
    And 2999 ms pass
    Then the model is not asked anything
    When 1 ms passes
    Then the model is asked to reply DONE

  @config @idle @WS-8
  Scenario: WRITE_SESSION_IDLE_MS wins over idle_ms in orion.yaml
    Given the "write_session" setting "idle_ms" is 3000
    And the environment variable "WRITE_SESSION_IDLE_MS" is "500"
    When the model streams 10 lines to "docs/guide.md" without DONE
    And 499 ms pass
    Then the model is not asked anything
    When 1 ms passes
    Then the model is asked to reply DONE

  # -- Non-goals, XML, strict mode -------------------------------------------------------------

  @protocol @non_goals @WS-14
  Scenario: XML tags are not required; tag-like text is ordinary content
    When the model writes "<content>\n# Title\n</content>" to "notes.md"
    Then the content of "notes.md" is "<content>\n# Title\n</content>\n"

  @protocol @non_goals @WS-3
  Scenario: Begin returns at once; tools are not long-running listeners
    When the model begins to create "docs/guide.md"
    Then the tool call succeeds
    And the model is asked 2 times
    And the prompt contains "session_id"

  @protocol @strict @WS-3 @WS-14
  Scenario: With strict mode a bare DONE is content and only DONE with the session id ends it
    Given the "write_session" setting "strict_done" is true
    When the model begins to create "docs/checklist.md"
    Then the model is told "end it with a line that is exactly DONE "
    When the model replies "- [x] step one\nDONE\n- [ ] step two\n"
    Then a write session is open for "docs/checklist.md"
    When 2000 ms pass
    Then the prompt contains "reply with DONE <session> on its own line"
    When the model replies "DONE <session>"
    Then the content of "docs/checklist.md" is "- [x] step one\nDONE\n- [ ] step two\n"

  # -- Persistence, implementation plan, traces ----------------------------------------------

  @journal @SR-3
  Scenario: The session is mirrored to disk while it streams
    When the model streams 250 lines to "docs/guide.md" without DONE
    Then the journal of "docs/guide.md" holds the plan, the content and the counts
    And the journal of "docs/guide.md" holds 250 lines on disk

  @tools @review @WS-1
  Scenario: There is no finalize tool; finalizing is Orion's own step
    When the model streams 10 lines to "docs/guide.md" without DONE
    Then the tool "WritePlanTool_finalize" is not advertised
    When the model calls "WritePlanTool_finalize" with the arguments:
      | session_id  | any |
      | raw_content | # Guide |
    Then the tool call is refused as "unknown_tool"
    And the tool call is refused with a message containing "WritePlanTool_begin"

  @tools @review @WP-15 @WS-1
  Scenario: Content larger than a small edit is refused in tool-call JSON and pointed to the begin call
    When the model calls "WritePlanTool_execute" to create "docs/big.md" with 5000 bytes of content
    Then the tool call is refused with a message containing "WritePlanTool_begin"
    And "docs/big.md" does not exist

  @tools @review @WP-15
  Scenario: The limit of a small edit is in bytes, not in characters
    When the model calls "WritePlanTool_execute" to create "docs/big.md" with 5000 bytes of accented content
    Then the tool call is refused with a message containing "the content is 5000 bytes"
    And "docs/big.md" does not exist

  @trace @review @WS-12 @WS-13
  Scenario: Traces are JSON and never hold the content
    When the model streams 120 lines to "docs/guide.md" and is cut off with finish reason "length"
    And the model streams 80 more lines to "docs/guide.md" and DONE
    Then "docs/guide.md" holds the generated lines 1 to 200
    And every trace event is JSON
    And the trace holds none of the streamed content
    And no notice to the user holds the streamed content

  @trace @review @validation @WS-13
  Scenario: The lines a correction round quotes and the corrected lines stay out of the trace
    When the model writes "A first line that is fine.\nA second line with a bell \x07 in it." to "notes.txt"
    Then the model is asked for corrections of line 2
    When the model corrects line 2 to "A second line without the bell in it."
    Then the content of "notes.txt" is "A first line that is fine.\nA second line without the bell in it.\n"
    And the trace holds none of the streamed content

  @trace @review @tools @WS-13
  Scenario: The content of a small edit stays out of the trace too
    When the model calls "WritePlanTool_execute" with the arguments:
      | intent      | a note |
      | target_file | notes.txt |
      | operation   | create |
      | content     | A distinctive line of a small edit.\n |
    Then the tool call succeeds
    And the trace holds none of the streamed content
