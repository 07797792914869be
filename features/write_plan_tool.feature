@write_session @write_plan_tool @operations
Feature: Every write is a plan that Orion checks, then carries out
  The model does not write files directly: it answers a small questionnaire (intent, target
  file, operation and the operation's fields), Orion validates the plan before anything is
  written, and a deterministic executor carries it out and reports what it did.
  Rules: docs/design/write-plan.md (WP-1 to WP-15)

  # -- Plan, validate, execute ---------------------------------------------------------------

  @WP-1
  Scenario: A plan is submitted, checked, then executed by Orion
    When the model begins to create "src/helpers.md"
    Then the tool call succeeds
    And "src/helpers.md" does not exist
    When the model streams 12 lines and DONE
    Then "src/helpers.md" holds the generated lines 1 to 12
    And the model is told "Created src/helpers.md (12 lines"

  # -- Create, append, overwrite-------------------------------------------------------------------------

  @WP-2
  Scenario: Create makes a new file, with missing directories
    When the model streams 5 lines to "docs/new/guide.md" and DONE
    Then "docs/new/guide.md" holds the generated lines 1 to 5

  @safety @WP-1 @WP-2
  Scenario: Create refuses a file that exists before any content streams
    Given the workspace has a file "docs/a.md" with 3 lines
    When the model begins to create "docs/a.md"
    Then the tool call is refused with a message containing "already exists; create only makes new files"
    And no write session is open
    And "docs/a.md" is unchanged

  @WP-3 @WP-13
  Scenario: Append adds the content at the end, with a report and a backup
    Given the workspace has a file "docs/a.md" with 3 lines
    When the model begins to append "docs/a.md"
    And the model replies "Line 4 of docs/a.md.\nLine 5 of docs/a.md.\nDONE\n"
    Then "docs/a.md" holds the generated lines 1 to 5
    And the model is told "Appended 2 lines to docs/a.md; backup saved"
    And a backup of "docs/a.md" holds its previous content

  @WP-3
  Scenario: Append starts on a new line when the file has no final line break
    Given the workspace has a file "notes.txt" containing "first"
    When the model begins to append "notes.txt"
    And the model replies "second\nDONE\n"
    Then the content of "notes.txt" is "first\nsecond\n"

  @WP-4 @WP-13
  Scenario: Overwrite replaces the whole file, with a backup
    Given the workspace has a file "config.md" with 30 lines
    When the model begins to overwrite "config.md"
    And the model replies "# Config\nnew content\nDONE\n"
    Then the content of "config.md" is "# Config\nnew content\n"
    And the model is told "Overwrote config.md (2 lines"
    And a backup of "config.md" holds its previous content

  # -- Insert, replace block, replace all-------------------------------------------------------------------------

  @WP-5
  Scenario: Insert puts the content after the whole line holding a unique marker
    Given the workspace has a file "docs/install.md" containing:
      """
      # Install
      ## Requirements
      Python 3.11
      ## Steps
      """
    When the model begins to insert into "docs/install.md" after the line with "## Requirements"
    And the model replies "pip 24\nDONE\n"
    Then the content of "docs/install.md" is:
      """
      # Install
      ## Requirements
      pip 24
      Python 3.11
      ## Steps
      """
    And the model is told "Inserted 1 line after marker in docs/install.md"

  @WP-5
  Scenario: Insert puts the content before the line holding the marker
    Given the workspace has a file "docs/install.md" containing:
      """
      # Install
      ## Steps
      """
    When the model begins to insert into "docs/install.md" before the line with "Steps"
    And the model replies "## Requirements\nPython 3.11\nDONE\n"
    Then the content of "docs/install.md" is:
      """
      # Install
      ## Requirements
      Python 3.11
      ## Steps
      """

  @WP-5
  Scenario: An insert marker may be a regular expression, matched in each line
    Given the workspace has a file "app.py" containing:
      """
      import os

      def route_home():
      """
    When the model begins to insert into "app.py" after the line matching "^def route_[a-z]+[(][)]:$"
    And the model replies "    return 'home'\nDONE\n"
    Then the content of "app.py" is:
      """
      import os

      def route_home():
          return 'home'
      """

  @safety @WP-5
  Scenario: A regular expression that matches more than one line is refused before any damage
    Given the workspace has a file "app.py" containing:
      """
      def a():
      def b():
      """
    When the model begins to insert into "app.py" after the line matching "^def"
    Then the tool call is refused with a message containing "location_marker '^def' occurs 2 times in app.py (lines 1, 2); it must occur exactly once"
    And no write session is open
    And "app.py" is unchanged

  @safety @WP-1 @WP-5
  Scenario: A marker that occurs more than once is refused before any damage
    Given the workspace has a file "notes.md" containing:
      """
      twice
      once
      twice
      """
    When the model begins to insert into "notes.md" after the line with "twice"
    Then the tool call is refused with a message containing "location_marker 'twice' occurs 2 times in notes.md (lines 1, 3); it must occur exactly once"
    And no write session is open
    And "notes.md" is unchanged

  @safety @WP-5
  Scenario: A marker that does not occur is refused
    Given the workspace has a file "notes.md" with 3 lines
    When the model begins to insert into "notes.md" after the line with "## Nowhere"
    Then the tool call is refused with a message containing "occurs 0 times"
    And "notes.md" is unchanged

  @WP-9
  Scenario: A missing answer is asked for by name
    Given the workspace has a file "notes.md" with 3 lines
    When the model calls "WritePlanTool_begin" with the arguments:
      | intent      | add a line |
      | target_file | notes.md |
      | operation   | insert |
      | position    | after |
    Then the tool call is refused as "invalid_arguments"
    And the tool call is refused with a message containing "requires location_marker"
    And no write session is open

  @WP-9
  Scenario Outline: An answer that belongs to another operation is refused ("<field>")
    Given the workspace has a file "notes.md" with 3 lines
    When the model calls "WritePlanTool_begin" with the arguments:
      | intent      | add a line |
      | target_file | notes.md |
      | operation   | append |
      | <field>     | <value> |
    Then the tool call is refused with a message containing "<field> belongs to operation '<owner>'"
    And no write session is open

    Examples:
      | field        | value | owner        |
      | search       | x     | replace_all  |
      | marker_regex | true  | insert       |

  @WP-6
  Scenario: Replace block replaces the lines between the two marker lines; the marker lines stay
    Given the workspace has a file "docs/install.md" containing:
      """
      # Install
      <!-- begin steps -->
      old step 1
      old step 2
      <!-- end steps -->
      Done.
      """
    When the model begins to replace the block of "docs/install.md" between "<!-- begin steps -->" and "<!-- end steps -->"
    And the model replies "new step\nDONE\n"
    Then the content of "docs/install.md" is:
      """
      # Install
      <!-- begin steps -->
      new step
      <!-- end steps -->
      Done.
      """
    And the model is told "Replaced block between markers in docs/install.md"

  @safety @WP-6
  Scenario: The end marker must come after the start marker
    Given the workspace has a file "notes.md" containing:
      """
      END
      middle
      START
      """
    When the model begins to replace the block of "notes.md" between "START" and "END"
    Then the tool call is refused with a message containing "must be on a later line than start_marker"
    And "notes.md" is unchanged

  @safety @WP-6
  Scenario: Markers on one line are refused: there is no block between them
    Given the workspace has a file "notes.md" containing:
      """
      <!-- begin --> <!-- end -->
      text
      """
    When the model begins to replace the block of "notes.md" between "<!-- begin -->" and "<!-- end -->"
    Then the tool call is refused with a message containing "must be on a later line than start_marker"
    And no write session is open

  @WP-7
  Scenario: Replace all replaces every occurrence of the search text
    Given the workspace has a file "settings.toml" containing:
      """
      host = "old.example"
      mirror = "old.example"
      """
    When the model begins to replace every "old.example" in "settings.toml"
    And the model replies "new.example\nDONE\n"
    Then the content of "settings.toml" is:
      """
      host = "new.example"
      mirror = "new.example"
      """
    And the model is told "Replaced 2 occurrences in settings.toml"

  @safety @WP-7
  Scenario: Replace all refuses a search text that does not occur
    Given the workspace has a file "settings.toml" containing "a = 1\n"
    When the model begins to replace every "b = 2" in "settings.toml"
    Then the tool call is refused with a message containing "occurs 0 times"

  # -- The system validates the plan -----------------------------------------------------------

  @safety @WP-8
  Scenario Outline: <operation> needs an existing file
    When the model begins to <operation> "docs/missing.md"
    Then the tool call is refused with a message containing "does not exist; operation '<operation>' edits an existing file"
    And no write session is open

    Examples:
      | operation |
      | append    |
      | overwrite |

  @safety @WP-10
  Scenario Outline: A target outside the workspace is refused ("<target>")
    When the model begins to create "<target>"
    Then the tool call is refused with a message containing "<message>"
    And no write session is open
    And no file outside the workspace changed

    Examples:
      | target                | message                          |
      | ../outside/keep.txt   | Give a path inside the workspace |
      | /tmp/orion-escape.txt | Give a path inside the workspace |
      | .git/config           | inside a .git directory          |
      | vendor/lib/.git/HEAD  | inside a .git directory          |
      | .orion/orion.db       | inside Orion's state directory   |

  @safety @WP-10
  Scenario: A binary file is refused
    Given the workspace has a binary file "logo.png"
    When the model begins to overwrite "logo.png"
    Then the tool call is refused with a message containing "is a binary file"
    And "logo.png" is unchanged

  @safety @WP-10
  Scenario: A directory is refused
    Given the workspace has a directory "docs"
    When the model begins to overwrite "docs"
    Then the tool call is refused with a message containing "is a directory"

  @safety @WP-10
  Scenario: A target that leads out of the workspace through a symbolic link is refused
    Given the workspace has a link "docs" to "../outside"
    When the model begins to create "docs/escape.md"
    Then the tool call is refused with a message containing "through a symbolic link"
    And no write session is open
    And no file outside the workspace changed

  @validation @WS-10
  Scenario: Invalid content is corrected before the write
    When the model writes "{\"name\": \"orion\",}" to "package.json"
    Then the model is asked for corrections of line 1
    And the prompt contains "JSON"
    And "package.json" does not exist
    When the model corrects line 1 to "{\"name\": \"orion\"}"
    Then the content of "package.json" is "{\"name\": \"orion\"}\n"

  @safety @WP-11
  Scenario: The plan is checked again when the file is written
    Given the workspace has a file "notes.md" containing:
      """
      # Notes
      ## Todo
      """
    When the model begins to insert into "notes.md" after the line with "## Todo"
    And the model streams 2 lines without DONE
    And the user changes "notes.md" to "# Notes\n"
    And 2000 ms pass
    And the model replies "DONE"
    Then the model is told "Could not write notes.md: location_marker '## Todo' occurs 0 times in notes.md"
    And the write session of "notes.md" is "failed"
    And the content of "notes.md" is "# Notes\n"

  @safety @WP-11
  Scenario: A file that became binary while the content streams is left alone
    Given the workspace has a file "notes.md" with 3 lines
    When the model begins to append "notes.md"
    And the model streams 2 more lines without DONE
    And the user replaces "notes.md" with a binary file
    And 2000 ms pass
    And the model replies "DONE"
    Then the model is told "Could not write notes.md: notes.md is a binary file"
    And the write session of "notes.md" is "failed"
    And "notes.md" is unchanged

  @safety @WP-12
  Scenario: A write that fails part-way leaves the file as it was and no temporary file behind
    Given the directory "small" of the workspace is on a disk with 64 KiB of space
    And the workspace has a file "small/notes.md" with 3 lines
    When the model begins to overwrite "small/notes.md"
    And the model streams 4000 more lines and DONE
    Then the model is told "Could not write small/notes.md"
    And "small/notes.md" is unchanged
    And the directory "small" holds only "notes.md"

  # -- Feedback, safety checks, auditability ---------------------------------------------------

  @WP-13
  Scenario: The report says what was done, and a backup is kept
    Given the workspace has a file "CHANGELOG.md" with 10 lines
    When the model begins to append "CHANGELOG.md"
    And the model streams 15 lines and DONE
    Then the model is told "Appended 15 lines to CHANGELOG.md; backup saved"
    And a backup of "CHANGELOG.md" holds its previous content

  @WP-14
  Scenario: The plan is kept as a log of intent
    When the model begins to create "docs/guide.md"
    Then the journal of "docs/guide.md" records the plan
    When the model streams 3 lines and DONE
    Then the trace holds the sha256 of "docs/guide.md"
    And the trace holds "\"operation\": \"create\""
    And the trace records "wrote"

  @WP-14
  Scenario: The intent of a write is kept with its journal and in the trace
    When the model begins to create "docs/guide.md" for "a guide for new users"
    Then the journal of "docs/guide.md" records the intent "a guide for new users"
    And the trace holds the sha256 of "a guide for new users"

  @WS-4
  Scenario: Content with quotes, backslashes and braces arrives verbatim
    When the model writes "say \"hi\" \\ {braces} [brackets]\n\ttabbed" to "docs/odd.md"
    Then the content of "docs/odd.md" is "say \"hi\" \\ {braces} [brackets]\n\ttabbed\n"

  @tools @WP-15
  Scenario: Small edits follow the same plan checks
    Given the workspace has a file "docs/a.md" with 3 lines
    When the model calls "WritePlanTool_execute" with the arguments:
      | intent      | replace |
      | target_file | docs/a.md |
      | operation   | create |
      | content     | x\n |
    Then the tool call is refused with a message containing "already exists"
    And "docs/a.md" is unchanged

  @tools @WP-15
  Scenario: Small edits go through the same validation
    When the model calls "WritePlanTool_execute" with the arguments:
      | intent      | a package file |
      | target_file | package.json |
      | operation   | create |
      | content     | {"name": "orion",}\n |
    Then the tool call is refused with a message containing "nothing was written"
    And the tool call is refused with a message containing "JSON"
    And "package.json" does not exist

  @commands @WP-13
  Scenario: A write can be undone while the file is as the session left it
    Given the workspace has a file "docs/a.md" with 3 lines
    When the model begins to overwrite "docs/a.md"
    And the model replies "replaced\nDONE\n"
    Then the content of "docs/a.md" is "replaced\n"
    When the user undoes the write session of "docs/a.md"
    Then "docs/a.md" is unchanged

  @commands @WP-13
  Scenario: Undo refuses when the file changed since the session wrote it
    Given the workspace has a file "docs/a.md" with 3 lines
    When the model begins to overwrite "docs/a.md"
    And the model replies "replaced\nDONE\n"
    And the user changes "docs/a.md" to "edited by hand\n"
    And the user undoes the write session of "docs/a.md"
    Then Orion reports an error containing "changed since session"
    And the content of "docs/a.md" is "edited by hand\n"
