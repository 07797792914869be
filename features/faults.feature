@faults
Feature: Faults of the environment
  A cloned workspace can ship symbolic links and special files, other users share the machine,
  another Orion works in the same workspace, a database gets edited by hand. Orion's own state
  stays where Orion keeps it, the user's files stay the user's, configuration is read with
  bounds, and nothing is overwritten or given up in silence (docs/design/faults.md).

  @FS-1 @safety
  Scenario: A state directory linked out of the workspace is refused before anything is written
    Given the workspace has a file "notes.md" containing "the old notes\n"
    And the workspace has a directory ".orion"
    And the workspace has a link ".orion/backups" to "../../outside"
    When the user runs "orion run" with the script:
      """
      conversation:
        - user: Rewrite the notes.
        - model:
            tool_calls:
              - name: WritePlanTool_begin
                arguments: {intent: new notes, target_file: notes.md, operation: overwrite}
        - model: {text: "the new notes\nDONE\n"}
        - model: {text: Done.}
      """
    Then the command fails with exit code 2
    And the console shows ".orion/backups is a symbolic link to '../../outside'"
    And the console shows "Nothing was written; remove the link, or give --state-dir"
    And "notes.md" is unchanged
    And no file outside the workspace changed

  @FS-1 @safety
  Scenario: An entry of the state directory linked elsewhere in the workspace is refused too
    Given the workspace has a file "notes.md" containing "the old notes\n"
    And the workspace has a directory "src"
    And the workspace has a directory ".orion"
    And the workspace has a link ".orion/backups" to "../src"
    When the user runs "orion run" with the script:
      """
      conversation:
        - user: Rewrite the notes.
        - model:
            tool_calls:
              - name: WritePlanTool_begin
                arguments: {intent: new notes, target_file: notes.md, operation: overwrite}
        - model: {text: "the new notes\nDONE\n"}
        - model: {text: Done.}
      """
    Then the command fails with exit code 2
    And the console shows ".orion/backups is a symbolic link to '../src'"
    And the console shows "outside the state directory"
    And "notes.md" is unchanged

  @FS-1 @safety
  Scenario: The session commands refuse a state directory that is a link out of the workspace
    Given the workspace has a link ".orion" to "../outside"
    When the user runs "orion sessions list --json"
    Then the command fails with exit code 2
    And the console shows "\"error\": "
    And the console shows ".orion is a symbolic link to '../outside'"
    And no file outside the workspace changed

  @FS-1 @safety
  Scenario: The state directory Orion creates is its owner's only, whatever the umask
    Given the process's umask is 022
    When the model begins to create "notes.md"
    And the model streams 3 more lines without DONE
    Then ".orion" has the mode 700

  @FS-2 @safety
  Scenario: Another user never reads a private file's new content while it is written
    Given the workspace has a file "secret.md" with 3 lines
    And "secret.md" has the mode 600
    And another user watches the directory of "secret.md"
    When the model begins to overwrite "secret.md"
    And the model streams 20000 lines to "secret.md" and DONE
    Then "secret.md" holds the generated lines 1 to 20000
    And "secret.md" has the mode 600
    And the other user could read none of the new content of "secret.md"

  @FS-2 @safety
  Scenario: A file of another user keeps its owner, group and mode when root appends to it
    Given the workspace has a file "log.md" with 2 lines
    And "log.md" belongs to the user "nobody" and the group "users"
    And "log.md" has the mode 2750
    When the model begins to append "log.md"
    And the model streams 2 more lines and DONE
    Then "log.md" belongs to the user "nobody" and the group "users"
    And "log.md" has the mode 2750
    And the model is told "Appended 2 lines to log.md; backup saved"

  @FS-2
  Scenario: A file with two hard links gets a file of its own, and the report says so
    Given the workspace has a file "notes.md" containing "the shared text\n"
    And the workspace has a hard link "copy.md" to "notes.md"
    When the model begins to overwrite "notes.md"
    And the model streams "the new text\n" as the content of "notes.md" and DONE
    Then the content of "notes.md" is "the new text\n"
    And "copy.md" is unchanged
    And the model is told "notes.md had 2 hard links: it is a file of its own now, and its other name keeps the old text"

  @FS-3 @config
  Scenario: A chart that is a FIFO is a located error, never a hang
    Given the workspace's orion.yaml is:
      """
      statecharts: [lifecycles/review.yaml]
      """
    And the workspace has a FIFO "lifecycles/review.yaml"
    When the user runs "orion check"
    Then the command fails with exit code 2
    And the console shows "orion.yaml:1:15: statecharts[0]: lifecycles/review.yaml is not a regular file (a FIFO)"

  @FS-3 @config
  Scenario: A chart of the character device /dev/zero is refused before it is read
    Given the workspace's orion.yaml is:
      """
      statecharts:
        - /dev/zero
      """
    When the user runs "orion run hello"
    Then the command fails with exit code 2
    And the console shows "orion.yaml:2:5: statecharts[0]: /dev/zero is not a regular file (a character device)"

  @FS-3 @config
  Scenario: An oversized chart is refused with the size and the limit
    Given the workspace's orion.yaml is:
      """
      statecharts: [huge.yaml]
      """
    And the workspace has a file "huge.yaml" with 700000 lines
    When the user runs "orion check"
    Then the command fails with exit code 2
    And the console shows "orion.yaml:1:15: statecharts[0]: huge.yaml is 17.3 MiB, over the 16.0 MiB Orion reads at most from such a file"

  @FS-4 @config
  Scenario: A pipeline with no system that replies is refused before anything runs
    Given the workspace's orion.yaml is:
      """
      pipeline: []
      """
    When the user runs "orion check"
    Then the command fails with exit code 1
    And the console shows "orion.yaml:1:11: the pipeline is empty, so no message would ever be answered"
    When the user runs "orion run hello --json"
    Then the command fails with exit code 2
    And the console shows "\"ok\": false"
    And the console shows "the pipeline is empty"

  @FS-5 @plan
  Scenario: A draft based on a revision another chat replaced is refused and both sides are told
    Given plan work is active
    And the model has stored the plan draft "# Release\n1. Build."
    When another session in the workspace stores the plan draft "# Release\n1. Build.\n2. Sign." while the model stores the plan draft "# Release\n1. Build.\n2. Announce."
    Then the tool call is refused with a message containing "another session in this workspace stored revision 2"
    And the tool call is refused with a message containing "Load the plan with plan_get, merge your changes into it"
    And the user is told "plan draft not stored"
    And the active plan is "READY" at revision 2 with the Markdown "# Release\n1. Build.\n2. Sign."

  @FS-5 @plan
  Scenario: A draft another chat stores while this one's is being stored is not overwritten
    Given plan work is active
    And the model has stored the plan draft "# Release\n1. Build."
    When another session in the workspace stores the plan draft "# Release\n1. Build.\n2. Sign." just as the model's draft "# Release\n1. Build.\n2. Announce." is stored
    Then the tool call is refused with a message containing "another session in this workspace stored revision 2"
    And the user is told "plan draft not stored"
    And the active plan is "READY" at revision 2 with the Markdown "# Release\n1. Build.\n2. Sign."

  @FS-6 @plan
  Scenario: A damaged plan is named with the way out, and new plan work goes on once it is dropped
    Given plan work is active
    And the model has stored the plan draft "# Release\n1. Build."
    And the Markdown of the active plan is damaged in plans.db
    When the user types "/plan"
    Then the command answers "plan work is unavailable: the active plan"
    And the command answers "is damaged in plans.db (its markdown is not UTF-8 (byte 0xff at offset 2))"
    And the command answers "`orion plan drop"
    When the user drops the damaged plan with "orion plan drop"
    Then the command succeeds
    And the console shows "dropped plan"
    When the user types "/plan on"
    Then the command answers "Plan work is on"

  @FS-7 @safety
  Scenario: SIGTERM in the middle of a write keeps every line that arrived and says how to go on
    When the user runs "orion run" in a terminal while the model writes 2000 lines to "notes.md" one every 40 ms, and SIGTERM arrives once 62 lines show
    Then the command fails with exit code 143
    And the open write session's journal holds every line the terminal showed
    And the console shows "for notes.md is still open ("
    And the console shows "`orion sessions recover "
    And the console shows "stopped by SIGTERM"
    And "notes.md" does not exist

  @FS-7 @safety
  Scenario: A terminal closed in the middle of a write keeps every line that arrived
    When the user runs "orion run" in a terminal while the model writes 2000 lines to "notes.md" one every 40 ms, and the terminal closes once 62 lines show
    Then the command fails with exit code 129
    And the open write session's journal holds every line the terminal showed

  @FS-8 @safety
  Scenario: A wall clock that jumps two hours ahead does not make a fresh session old
    When the model streams 150 lines to "docs/guide.md" without DONE
    And Orion crashes
    And the wall clock jumps 2 hours ahead
    And Orion starts again 1 minute later
    Then recovery of "docs/guide.md" is offered
    And the journal of "docs/guide.md" is still there

  @FS-8 @safety
  Scenario: A session past its TTL goes to the trash, and only another TTL there deletes it
    When the model streams 150 lines to "docs/guide.md" without DONE
    And Orion crashes
    And Orion starts again 90 minutes later
    Then the journal of "docs/guide.md" is gone
    And the user is told "moved orphaned write session"
    And the user is told "It is deleted from there after another 1 h"
    And the trash holds the journal of "docs/guide.md" with 150 lines
    When the wall clock jumps 3 hours ahead
    And Orion exits and starts again 30 minutes later
    Then the trash holds the journal of "docs/guide.md" with 150 lines
    When Orion exits and starts again 31 minutes later
    Then the user is told "deleted write session"
    And the trash no longer holds the journal of "docs/guide.md"

  @FS-9 @safety
  Scenario: A journal is its owner's only, whatever the umask
    Given the workspace has a file "secret.md" with 3 lines
    And "secret.md" has the mode 600
    When the model begins to overwrite "secret.md"
    And the model streams 120 more lines without DONE
    Then the journal of "secret.md" is its owner's only

  @FS-9 @safety
  Scenario: The journal of a new file is its owner's only, whatever the umask
    Given the process's umask is 022
    When the model begins to create "notes.md"
    And the model streams 120 more lines without DONE
    Then the journal of "notes.md" is its owner's only

  @FS-9 @safety
  Scenario: The journal of a file everyone may read is still its owner's only
    Given the process's umask is 022
    And the workspace has a file "readme.md" with 3 lines
    And "readme.md" has the mode 644
    When the model begins to overwrite "readme.md"
    And the model streams 120 more lines without DONE
    Then the journal of "readme.md" is its owner's only

  @FS-9 @safety
  Scenario: A journal whose content is a link out of the workspace is never recovered through it
    Given the scenario's clock starts 10 minutes before the real time
    When the model streams 30 lines to "docs/guide.md" without DONE
    And Orion crashes
    And the journal file "content.txt" of "docs/guide.md" is replaced by a link to the file outside the workspace
    And the user runs "orion sessions recover <session> --finalize"
    Then the command fails with exit code 1
    And the console shows "cannot be recovered: its content.txt is a symbolic link to"
    And the console shows "Nothing written"
    And "docs/guide.md" does not exist
    And no file outside the workspace changed

  @FS-10 @safety
  Scenario: Too many open files in the middle of a write lose nothing and say where the content is
    Given the "write_session" setting "flush_interval_ms" is 200
    When the user runs "orion run" in a terminal while the model writes 600 lines to "notes.md" one every 10 ms, and the open-file limit drops to 10 once 100 lines show
    Then the command fails with exit code 1
    And the write session's journal holds all 600 lines
    And the console does not show "kept in memory"
    And the console shows "Too many open files"
    And the console shows "The content is saved in write session"
    And the console does not show "Traceback"

  @FS-11 @config
  Scenario: A completion that enters its own final state again is refused before anything runs
    Given the workspace has a file "charts/spin.yaml" containing:
      """
      extends: write_session
      states:
        session_active:
          states:
            spin:
              tags: [open, receiving]
              initial: f
              states:
                f: {final: true}
      transitions:
        insert:
          - {id: to_spin, trigger: message_end, before: pause, source: session_active.awaiting_content, dest: session_active.spin}
          - {trigger: done.state.session_active.spin, source: session_active.spin, dest: session_active.spin}
      """
    And the workspace's orion.yaml is:
      """
      statecharts: [charts/spin.yaml]
      """
    When the user runs "orion check"
    Then the command fails with exit code 1
    And the console shows "charts/spin.yaml:13:17: 'done.state.session_active.spin' re-enters 'session_active.spin.f'"
    When the user runs "orion run hello"
    Then the command fails with exit code 2

  @FS-11 @safety
  Scenario: A loop no check can see ends, and the content that arrived stays in the journal
    Given the workspace has a file "charts/spin.yaml" containing:
      """
      extends: write_session
      states:
        session_active:
          states:
            spin:
              tags: [open, receiving]
              initial: f
              states:
                f: {final: true}
      transitions:
        insert:
          - {id: to_spin, trigger: message_end, before: pause, source: session_active.awaiting_content, dest: session_active.spin}
          - {trigger: done.state.session_active.spin, source: session_active.spin, dest: session_active.spin, unless: model_asked}
      """
    And the workspace's orion.yaml is:
      """
      statecharts: [charts/spin.yaml]
      """
    When the user runs "orion run" with the script:
      """
      conversation:
        - user: Write the notes.
        - model:
            tool_calls:
              - name: WritePlanTool_begin
                arguments: {intent: notes, target_file: notes.md, operation: create}
        - model: {text: "first line\nsecond line\n"}
      """
    Then the command fails with exit code 1
    And the console shows "did not come to rest within 10,000 microsteps"
    And the journal of "notes.md" holds 2 lines on disk
    And the console does not show "Traceback"

  @FS-12 @safety
  Scenario: Trace events beyond keep_days go as Orion starts, and Orion says how many
    Given the trace database holds events 45, 31, 29 and 0 days old
    When the user opens "orion chat" and leaves at once
    Then the console shows "traces: removed 2 events more than 30 days older than the newest (trace.keep_days in orion.yaml; 0 keeps every event)"
    And the trace database holds the events 29 and 0 days old

  @FS-12 @safety
  Scenario: A wall clock far ahead of the newest trace event removes only what is older than it
    Given the trace database holds events 90, 91 and 125 days old
    When the user opens "orion chat" and leaves at once
    Then the console shows "traces: removed 1 events"
    And the trace database holds the events 90 and 91 days old

  @FS-12 @config
  Scenario: keep_days 0 keeps every trace event
    Given the trace database holds events 400 and 0 days old
    And the workspace's orion.yaml is:
      """
      trace:
        keep_days: 0
      """
    When the user opens "orion chat" and leaves at once
    Then the console does not show "traces:"
    And the trace database holds the events 400 and 0 days old

  @FS-14 @safety
  Scenario: Recovering a session with --finalize keeps its text set aside and says so
    Given the workspace has a file "notes.md" containing "ship it on Friday\n"
    When the model begins to create "summary.md"
    And the model says "Let me read the notes first.\n" and calls "read_file" with:
      """
      {"path": "notes.md"}
      """
    And the model replies "# Summary\n"
    And Orion crashes
    And the user runs "orion sessions recover <session> --finalize"
    Then the console shows "1 line set aside, not written: part 1"
    And the content of "summary.md" is "# Summary\n"
    When the user runs "orion sessions show <session>"
    Then the console shows "Let me read the notes first."

  @FS-15 @safety
  Scenario: A set-aside part whose number climbs out of its directory is refused, never read
    Given the workspace has a file "notes.md" containing "ship it on Friday\n"
    When the model begins to create "summary.md"
    And the model says "Let me read the notes first.\n" and calls "read_file" with:
      """
      {"path": "notes.md"}
      """
    And Orion crashes
    And the set-aside index of "summary.md" numbers its part 1 "../../../../../outside/keep"
    And the user runs "orion sessions show <session>"
    Then the console shows "is no part, refused"
    And the console does not show "outside the workspace"

  @FS-15 @safety
  Scenario: A shipped journal with a forged part number and a resume mark writes nothing outside
    Given the workspace has a file "notes.md" containing "ship it on Friday\n"
    And the workspace has a file "payload.txt" containing "shipped with the repository\n"
    When the model begins to create "summary.md"
    And the model says "Let me read the notes first.\n" and calls "read_file" with:
      """
      {"path": "notes.md"}
      """
    And the model replies "# Summary\n"
    And Orion crashes
    And the set-aside index of "summary.md" numbers its part 1 "../../../../payload"
    And the user recovers the write session of "summary.md" with --continue
    And Orion starts again
    Then the model is asked to continue
    When the model replies "The end.\nDONE\n"
    Then the content of "summary.md" is "# Summary\nThe end.\n"
    And no file outside the workspace changed

  @FS-20 @idle
  Scenario: A model that stops in the middle of a line every time is asked max_idle_prompts times, then the file is written as incomplete
    When the model begins to create "VERSION"
    And the model replies "version 1"
    Then the model is asked whether the file ends in the middle of line 1
    When the model replies "version 2"
    Then the model is asked whether the file ends in the middle of line 1
    When the model replies "version 3"
    Then the model is asked whether the file ends in the middle of line 1
    When the model replies "version 4"
    Then the write session of "VERSION" is "incomplete"
    And the content of "VERSION" is "version 4"
    And the user is told "line 1 still unfinished after 3 prompts: writing VERSION as incomplete (0 lines)"

  @FS-20 @idle
  Scenario: A complete line after the unfinished-line question sets the count of prompts back
    When the model begins to create "notes.txt"
    And the model replies "one"
    And the model replies "one\ntw"
    And the model replies "two\nthr"
    And the model replies "three\nfou"
    And the model replies "four\nDONE\n"
    Then the content of "notes.txt" is "one\ntwo\nthree\nfour\n"
    And the write session of "notes.txt" is "written"

  @FS-21 @safety
  Scenario: A marker_regex that backtracks without end is refused at begin with the line it stopped at, and nothing is written
    Given the workspace has a file "data.txt" containing "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!\nlast line\n"
    When the user runs "orion run" with the script:
      """
      conversation:
        - user: Add a line after the marker.
        - model:
            tool_calls:
              - name: WritePlanTool_begin
                arguments: {intent: a line, target_file: data.txt, operation: insert, location_marker: "(a|aa)+$", marker_regex: true, position: after}
        - expect: "took more than 1 s to search data.txt and was stopped at line 1: the pattern backtracks without end"
        - model: {text: I will pick another marker.}
      """
    Then the command succeeds
    And "data.txt" is unchanged
    And the console does not show "Traceback"

  @FS-21 @safety
  Scenario: The nested repeat that Python's engine searches for ever is answered at once
    Given the workspace has a file "data.txt" containing "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!\n"
    When the user runs "orion run" with the script:
      """
      conversation:
        - user: Add a line after the marker.
        - model:
            tool_calls:
              - name: WritePlanTool_begin
                arguments: {intent: a line, target_file: data.txt, operation: insert, location_marker: "(a+)+$", marker_regex: true, position: after}
        - expect: "occurs 0 times in data.txt"
        - model: {text: I will pick another marker.}
      """
    Then the command succeeds
    And "data.txt" is unchanged

  @FS-23 @safety
  Scenario: A FIFO where the chat history goes is named once and the chat answers without history
    Given the workspace has a directory ".orion"
    And the workspace has a FIFO ".orion/chat_history"
    And a model endpoint on this machine
    And the endpoint then replies "Hi there."
    When the user types "Hello" in "orion chat" in a terminal, waits for "Hi there." and leaves
    Then the command succeeds
    And the console shows "is a FIFO, not a regular file: it is never opened, and this chat goes on without history"
    And the console does not show "Traceback"

  @FS-23 @safety
  Scenario: A chat history others could read is made private, and the user is told
    Given the workspace has a file ".orion/chat_history" containing "\n# then\n+my secret\n"
    And ".orion/chat_history" has the mode 644
    And a model endpoint on this machine
    And the endpoint then replies "Hi there."
    When the user types "Hello" in "orion chat" in a terminal, waits for "Hi there." and leaves
    Then the command succeeds
    And the console shows "could be read by others (mode 0644); it is now readable by you only (0600)"
    And ".orion/chat_history" has the mode 600

  @FS-22 @safety
  Scenario: orion sessions diff of a target that became a FIFO names it and never waits for it
    Given the workspace has a file "notes.md" with 3 lines
    When the model begins to overwrite "notes.md"
    And the model streams 2 lines to "notes.md" and DONE
    And another program replaces "notes.md" by a FIFO
    And the user runs "orion sessions diff <session>"
    Then the command fails with exit code 1
    And the console shows "notes.md is not a regular file now; nothing was read from it (notes.md is a FIFO, not a regular file: no diff is made of it)"
    And the console does not show "Traceback"

  @FS-24 @config
  Scenario: An absurd --older-than is one line that names it and the largest accepted, never a traceback
    Given the trace database holds events 45 and 0 days old
    When the user runs "orion traces prune --older-than 99999999999999999999d"
    Then the command fails with exit code 2
    And the console shows "'99999999999999999999d' is longer than Orion counts: at most 36525d (100 years)"
    And the console does not show "Traceback"
    And the trace database holds the events 45 and 0 days old

  @FS-24 @config
  Scenario: A date past what a clock can show is one line too
    Given the trace database holds events 45 and 0 days old
    When the user runs "orion traces prune --older-than 9999-12-31T23:59:59-12:00"
    Then the command fails with exit code 2
    And the console shows "is outside the dates Orion counts (1970-01-01 to 9998-12-31)"
    And the console does not show "Traceback"
