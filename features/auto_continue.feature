@write_session @auto_continue @truncation
Feature: Auto-continue after truncated output
  When the model's output is cut off before DONE, Orion saves what arrived and at once asks the
  model to continue in the same session, at most 3 times; then it writes what it has, marked
  incomplete. An empty buffer is not continued, and a continuation that starts the file over
  is set aside, announced and reversible.
  Rules: docs/design/auto-continue.md (AC-1 to AC-9)

  # -- The flow ------------------------------------------------------------------------------

  @AC-2
  Scenario: The session remembers the target file and the operation it writes
    When the model begins to append "CHANGELOG.md"
    Then the tool call is refused with a message containing "does not exist"
    When the model begins to create "docs/long.md"
    Then the journal of "docs/long.md" records the plan
    And the system prompt contains "A write session is open: docs/long.md (create"

  @AC-1
  Scenario: Output cut off without DONE is saved, and the cut-off is noticed at once
    When the model streams 120 lines to "docs/long.md" and is cut off with finish reason "length"
    Then the journal of "docs/long.md" holds 120 lines on disk
    And the model is asked to continue
    And the user is told "part 1 saved (120 lines), continuing 1/3"
    And "docs/long.md" does not exist

  @AC-3
  Scenario: The request to continue names the saved lines, quotes the last ones and asks for DONE
    When the model streams 120 lines to "docs/long.md" and is cut off with finish reason "length"
    Then the prompt contains "Your output was cut off. 120 lines are saved (continuation 1/3)."
    And the prompt contains "> Line 118 of docs/long.md.\n> Line 119 of docs/long.md.\n> Line 120 of docs/long.md."
    And the prompt contains "The last lines of docs/long.md received were"
    And the prompt contains "Continue exactly where you stopped, with line 121: everything you send is added after these lines, so do not repeat them (quoted lines sent again at the start are set aside, not written twice), and end with DONE on its own line."

  @AC-2
  Scenario: The continuation is appended to the same file without a new begin
    When the model streams 120 lines to "docs/long.md" and is cut off with finish reason "length"
    And the model streams 80 more lines and DONE
    Then "docs/long.md" holds the generated lines 1 to 200
    And one write session was begun
    And the write session has 1 continuation
    And the model is told "Created docs/long.md (200 lines"

  @AC-2 @AC-4
  Scenario: Several continuations complete a long document
    When the model streams 100 lines to "docs/long.md" and is cut off with finish reason "length"
    And the model streams 100 more lines and is cut off with finish reason "length"
    And the model streams 100 more lines and is cut off with finish reason "length"
    And the model streams 50 more lines and DONE
    Then "docs/long.md" holds the generated lines 1 to 350
    And the write session has 3 continuations
    And the write session of "docs/long.md" is "written"

  @AC-4
  Scenario: Each continuation is counted
    When the model streams 10 lines to "docs/long.md" and is cut off with finish reason "length"
    Then the write session has 1 continuation
    And the write session is waiting for the rest of the cut-off output
    When the model streams 10 more lines and is cut off with finish reason "length"
    Then the write session has 2 continuations
    And the prompt contains "continuation 2/3"
    And the system prompt contains "state continuing"

  @AC-1
  Scenario Outline: A cut-off output is recognised by its finish reason "<reason>"
    When the model streams 30 lines to "docs/long.md" and is cut off with finish reason "<reason>"
    Then the model is asked to continue
    When the model streams 5 more lines and DONE
    Then "docs/long.md" holds the generated lines 1 to 35

    Examples:
      | reason                       |
      | length                       |
      | insufficient_system_resource |
      | content_filter               |
      | something_undocumented       |

  @AC-1
  Scenario: A stream that ends without a finish reason is a cut-off and is continued
    When the model streams 30 lines to "docs/long.md" and is cut off without a finish reason
    Then the model is asked to continue
    When the model streams 5 more lines and DONE
    Then "docs/long.md" holds the generated lines 1 to 35

  @AC-1
  Scenario: The request to continue is sent at once, without waiting for a timer
    When the model streams 30 lines to "docs/long.md" and is cut off with finish reason "length"
    Then the model is asked to continue
    And the model is not asked to reply DONE

  # -- The limits ----------------------------------------------------------------------------

  @edge_case @AC-4
  Scenario: The fourth cut-off writes what arrived, marked incomplete, and warns the user
    When the model streams 50 lines to "docs/long.md" and is cut off with finish reason "length"
    And the model streams 50 more lines and is cut off with finish reason "length"
    And the model streams 50 more lines and is cut off with finish reason "length"
    And the model streams 50 more lines and is cut off with finish reason "length"
    Then the model is not asked to continue
    And "docs/long.md" holds the generated lines 1 to 200
    And the write session of "docs/long.md" is "incomplete"
    And the user is told "continuations used up (3/3): writing docs/long.md as incomplete (200 lines)"
    And the model is told "(incomplete: the output was cut off)"
    And the trace records "write incomplete"

  @config @AC-4
  Scenario: The number of continuations is a setting
    Given the "write_session" setting "max_continuations" is 1
    When the model streams 10 lines to "docs/long.md" and is cut off with finish reason "length"
    Then the prompt contains "continuation 1/1"
    When the model streams 10 more lines and is cut off with finish reason "length"
    Then the model is not asked to continue
    And the write session of "docs/long.md" is "incomplete"
    And "docs/long.md" holds the generated lines 1 to 20

  @edge_case @AC-5 @SR-3
  Scenario: A cut-off output with no content is not continued and nothing is written
    When the model begins to create "docs/empty.md"
    And the model replies "" with finish reason "length"
    Then the model is not asked to continue
    And the write session of "docs/empty.md" is "abandoned"
    And the model is told "The write session for docs/empty.md was abandoned: no content arrived before the output was cut off."
    And "docs/empty.md" does not exist
    And no write session directory is left

  @edge_case @AC-5
  Scenario: A cut-off output of only white space counts as no content
    When the model begins to create "docs/empty.md"
    And the model replies "\n  \n\t\n" with finish reason "length"
    Then the model is not asked to continue
    And the write session of "docs/empty.md" is "abandoned"
    And "docs/empty.md" does not exist

  @edge_case @AC-9
  Scenario: An empty answer to the request to continue falls back to the idle prompt
    When the model streams 40 lines to "docs/long.md" and is cut off with finish reason "length"
    And the model replies with an empty message
    Then a write session is open for "docs/long.md"
    When 2000 ms pass
    Then the model is asked to reply DONE
    When the model replies "DONE"
    Then "docs/long.md" holds the generated lines 1 to 40

  @edge_case @AC-6
  Scenario: A continuation that starts the file over is set aside and announced; the session goes on
    When the model streams 100 lines to "docs/long.md" and is cut off with finish reason "length"
    And the model starts the file over with 100 lines from line 1 and DONE
    Then the user is told "the reply that started docs/long.md over (100 lines, first line 'Line 1 of docs/long.md.') was set aside"
    And the write session is waiting for DONE or more content
    When 2000 ms pass
    Then the prompt contains "Your reply started docs/long.md over"
    And the prompt contains "call WritePlanTool_keep with part 1"
    When the model replies "DONE"
    Then "docs/long.md" holds the generated lines 1 to 100
    And the write session of "docs/long.md" is "written_with_set_aside"

  @edge_case @AC-6
  Scenario: A restart is recognised however the reply is split, even when its first line is long
    When the model begins to create "docs/wide.md"
    And the model replies "# A guide to Orion for teams: write sessions, plan mode, statecharts and plugins\nInstall it.\nRun orion check.\nWrite a plugin.\n" with finish reason "length"
    And the model replies in the chunks "# A guide to Orion for teams: write sessions, plan mode, statecharts a", "nd plugins\nInstall it.\nRun orion check.\n" and "Write a plugin.\nDONE\n"
    Then the user is told "the reply that started docs/wide.md over (4 lines"
    When 2000 ms pass
    And the model replies "DONE"
    Then the content of "docs/wide.md" is "# A guide to Orion for teams: write sessions, plan mode, statecharts and plugins\nInstall it.\nRun orion check.\nWrite a plugin.\n"
    And the write session of "docs/wide.md" is "written_with_set_aside"

  @edge_case @AC-6
  Scenario: Three lines alike do not make a restart: a multi-document YAML file is written whole
    When the model begins to create "deploy.yaml"
    And the model replies "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\n" with finish reason "length"
    And the model replies "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\nDONE\n"
    Then the content of "deploy.yaml" is "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n"
    And the write session of "deploy.yaml" is "written"

  @edge_case @AC-6 @AC-7
  Scenario: Rows that are all alike, without a header, are never a restart: resent rows are set aside and put back
    When the model begins to create "zeros.csv"
    And the model replies "0,0\n0,0\n0,0\n0,0\n0,0\n0,0\n" with finish reason "length"
    And the model replies "0,0\n0,0\n0,0\n0,0\n0,0\n0,0\n0,0\n0,0\n0,0\n0,0\n0,0\n0,0\n"
    Then the user is told "the quoted lines the reply sent again (3 lines, first line '0,0') was set aside"
    And the user is not told "started zeros.csv over"
    When the model calls "WritePlanTool_keep" with:
      """
      {"part": 1}
      """
    Then the tool call succeeds
    When the model replies "DONE"
    Then the content of "zeros.csv" is "0,0\n0,0\n0,0\n0,0\n0,0\n0,0\n0,0\n0,0\n0,0\n0,0\n0,0\n0,0\n0,0\n0,0\n0,0\n0,0\n0,0\n0,0\n"
    And the write session of "zeros.csv" is "written"

  @edge_case @AC-9
  Scenario: A write that fails keeps the content for a later recovery
    Given the workspace has a file "CHANGELOG.md" with 3 lines
    When the model begins to append "CHANGELOG.md"
    And the model streams 40 lines and is cut off with finish reason "length"
    And the user deletes "CHANGELOG.md"
    And the model streams 10 more lines and DONE
    Then the model is told "Could not write CHANGELOG.md"
    And the model is told "orion sessions recover"
    And the write session of "CHANGELOG.md" is "failed"
    And the journal of "CHANGELOG.md" holds 50 lines on disk

  # -- Repeats (smart continuation): only what the request declares ----------------------------

  @AC-7
  Scenario: A line cut in the middle is sent again whole and replaces the cut line
    When the model begins to create "docs/long.md"
    And the model replies "# Guide\nInstall Orion, then run orion ch" with finish reason "length"
    Then the prompt contains "start your reply with line 2 again, whole"
    When the model replies "Install Orion, then run orion check.\nDONE\n"
    Then the content of "docs/long.md" is "# Guide\nInstall Orion, then run orion check.\n"
    And the write session of "docs/long.md" is "written"

  @AC-7
  Scenario: A reply that starts with the cut line is read as the cut line, not as a quoted line sent again
    When the model begins to create "rows.csv"
    And the model replies "a,b\n0,0\n0," with finish reason "length"
    And the model replies "0,0\n0,0\nDONE\n"
    Then the content of "rows.csv" is "a,b\n0,0\n0,0\n0,0\n"
    And the write session of "rows.csv" is "written"

  @AC-7
  Scenario: After a cut at the end of a line, quoted lines sent again are set aside, never written twice in silence
    When the model begins to create "setup.md"
    And the model replies "# Setup\n1. Clone the repository.\n2. Install the dependencies.\n" with finish reason "length"
    Then the prompt contains "Continue exactly where you stopped, with line 4"
    And the prompt contains "quoted lines sent again at the start are set aside"
    When the model replies "2. Install the dependencies.\n3. Run the tests.\nDONE\n"
    Then the content of "setup.md" is "# Setup\n1. Clone the repository.\n2. Install the dependencies.\n3. Run the tests.\n"
    And the write session of "setup.md" is "written_with_set_aside"
    And the text set aside for "setup.md" is "2. Install the dependencies.\n"

  @AC-7
  Scenario: After a cut at the end of a line, identical rows sent again come back with WritePlanTool_keep
    When the model begins to create "zeros.csv"
    And the model replies "a,b\n0,0\n0,0\n" with finish reason "length"
    And the model replies "0,0\n0,0\n"
    Then the user is told "the quoted lines the reply sent again (2 lines, first line '0,0') was set aside"
    When the model calls "WritePlanTool_keep" with:
      """
      {"part": 1}
      """
    Then the tool call succeeds
    When the model replies "DONE"
    Then the content of "zeros.csv" is "a,b\n0,0\n0,0\n0,0\n0,0\n"
    And the write session of "zeros.csv" is "written"

  # -- Integration and success criteria ------------------------------------------------------

  @AC-2
  Scenario: Content cut off while appending to an existing file is appended once
    Given the workspace has a file "docs/notes.md" with 3 lines
    When the model begins to append "docs/notes.md"
    And the model streams 100 lines and is cut off with finish reason "length"
    And the model streams 20 more lines and DONE
    Then "docs/notes.md" has 123 lines
    And "docs/notes.md" contains "Line 3 of docs/notes.md.\nLine 1 of docs/notes.md.\n"
    And the model is told "Appended 120 lines to docs/notes.md"
    And a backup of "docs/notes.md" holds its previous content

  @AC-2
  Scenario: Auto-continue needs nothing from the user between the parts
    When the model streams 100 lines to "docs/long.md" and is cut off with finish reason "length"
    And the model streams 100 more lines and is cut off with finish reason "length"
    And the model streams 10 more lines and DONE
    Then the user typed 1 line
    And "docs/long.md" holds the generated lines 1 to 210

  @AC-2
  Scenario: The model sees the part that was cut off as it sent it, and a reference once written
    When the model streams 120 lines to "docs/long.md" and is cut off with finish reason "length"
    Then the conversation holds "Line 1 of docs/long.md.\nLine 2 of docs/long.md."
    And the conversation holds "Line 120 of docs/long.md.\n"
    When the model streams 80 more lines and DONE
    Then the conversation does not hold "Line 1 of docs/long.md."
    And the conversation holds "[wrote docs/long.md: 200 lines, sha256 "
    And the conversation holds "[continued: docs/long.md]"

  @AC-8
  Scenario: Each continuation is reported with its progress
    When the model streams 100 lines to "docs/long.md" and is cut off with finish reason "length"
    Then the user is told "part 1 saved (100 lines), continuing 1/3"
    When the model streams 100 more lines and is cut off with finish reason "length"
    Then the user is told "part 2 saved (200 lines), continuing 2/3"
    And the user is not told "part 1 saved"
    And the trace records "write_session truncated"

  @AC-4
  Scenario: The user can still ask for the rest by hand after an incomplete write
    Given the "write_session" setting "max_continuations" is 0
    When the model streams 100 lines to "docs/long.md" and is cut off with finish reason "length"
    Then the write session of "docs/long.md" is "incomplete"
    When the model replies "The file was cut off."
    And the user says "Please append the rest."
    And the model begins to append "docs/long.md"
    And the model streams 20 more lines and DONE
    Then "docs/long.md" holds the generated lines 1 to 120

  @recovery @AC-9 @SR-8
  Scenario: A crash during a continuation can be continued after a restart
    When the model streams 100 lines to "docs/long.md" and is cut off with finish reason "length"
    And Orion crashes
    And the user recovers the write session of "docs/long.md" with --continue
    And Orion starts again
    Then the model is asked to continue
    And the prompt contains "100 lines are saved"
    When the model streams 20 more lines and DONE
    Then "docs/long.md" holds the generated lines 1 to 120
    And the write session has 2 continuations
