@write_session @requirements_v3
Feature: Write sessions survive crashes, full disks and restarts
  A long write keeps its content in memory and saves it to disk as it streams, so a crash
  loses at most the last few seconds. When Orion starts again it offers to recover what a
  crashed session left behind, for an hour; the orion sessions commands list, recover,
  discard and clean them. A disk that is full or refuses the writes does not stop the write.
  Rules: docs/design/session-protocol-and-recovery.md (SR-1 to SR-11)

  # -- What the model may call, where the content goes ----------------------------------------------------

  @tools @SR-1 @WS-1
  Scenario: Only the small-edit tool takes content, and only a little
    When the user says "Write the guide."
    Then no advertised tool has a parameter "raw_content"
    And the tool "WritePlanTool_begin" has no parameter "content"
    And the tool "WritePlanTool_execute" takes "content"
    And the parameter "content" of "WritePlanTool_execute" takes at most 4096 characters
    And the parameter "target_file" of "WritePlanTool_begin" takes at most 1024 characters
    And the parameter "intent" of "WritePlanTool_begin" takes at most 500 characters

  @tools @WS-1
  Scenario: The begin call refuses a content argument
    When the model calls "WritePlanTool_begin" with the arguments:
      | intent      | guide |
      | target_file | docs/guide.md |
      | operation   | create |
      | content     | # Guide |
    Then the tool call is refused as "invalid_arguments"
    And no write session is open

  @tools @SR-1
  Scenario: The only write tools are the begin call and the small-edit tool
    When the user says "Write the guide."
    Then the advertised tools are "read_file", "list_files", "WritePlanTool_begin" and "WritePlanTool_execute"
    And the tool "WritePlanTool_finalize" is not advertised

  @journal @SR-4
  Scenario: Content is kept in memory and mirrored to disk
    When the model has streamed 60 lines to "docs/guide.md" so far
    Then the journal of "docs/guide.md" holds 50 lines on disk
    When the model streams 0 more lines and DONE
    Then "docs/guide.md" holds the generated lines 1 to 60

  # -- Beginning and finalizing ----------------------------------------------------------------------------

  @tools @journal @SR-2
  Scenario: A valid begin returns the session id and creates the session's journal
    When the model begins to create "docs/guide.md"
    Then the tool call succeeds
    And the tool result says "stage" is "awaiting_content"
    And the tool result has the fields "session_id", "stage", "target_file", "operation", "session_dir" and "instruction"
    And the tool result's "session_dir" is the journal of "docs/guide.md"
    And the journal of "docs/guide.md" holds the plan, the content and the counts
    And the journal of "docs/guide.md" records the plan

  @tools @SR-2
  Scenario: An invalid begin is refused and creates nothing
    When the model calls "WritePlanTool_begin" with the arguments:
      | intent      | guide |
      | target_file | docs/guide.md |
      | operation   | explode |
    Then the tool call is refused as "invalid_arguments"
    And the tool call is refused with a message containing "operation"
    And no write session is open
    And no write session directory is left

  @protocol @SR-6
  Scenario: Finalizing writes from the journal and reports a summary, never the content
    When the model streams 250 lines to "docs/guide.md" and DONE
    Then the model is told "Created docs/guide.md (250 lines"
    And the prompt does not contain "Line 1 of docs/guide.md."
    And "docs/guide.md" holds the generated lines 1 to 250

  @tools @SR-1
  Scenario: Finalizing cannot be called as a tool
    When the model calls "WritePlanTool_finalize" with the arguments:
      | session_id | any |
    Then the tool call is refused as "unknown_tool"

  @journal @SR-3
  Scenario: After the write the session's journal is removed
    When the model streams 30 lines to "docs/guide.md" and DONE
    Then "docs/guide.md" has 30 lines
    And no write session directory is left

  @journal @SR-3
  Scenario: An abandoned session's journal is removed too
    When the model begins to create "docs/empty.md"
    And the model replies "" with finish reason "length"
    Then the write session of "docs/empty.md" is "abandoned"
    And no write session directory is left

  @tools @WP-15
  Scenario: The small-edit tool writes small content at once
    When the model calls "WritePlanTool_execute" with the arguments:
      | intent      | a note |
      | target_file | notes.txt |
      | operation   | create |
      | content     | one small note\n |
    Then the tool call succeeds
    And the content of "notes.txt" is "one small note\n"

  @edge_case @commands @SR-6
  Scenario: Finalizing an unknown session fails with an error that names it
    When the user recovers the write session "nosuchid" with --finalize
    Then Orion reports an error containing "no write session 'nosuchid'"

  @edge_case @disk @SR-7
  Scenario: A full disk falls back to memory with one warning, and the file is still written
    Given the disk holding the write-session journals is full
    When the model streams 120 lines to "docs/guide.md" and DONE
    Then "docs/guide.md" holds the generated lines 1 to 120
    And the user is warned once "cannot save docs/guide.md's content to disk (ENOSPC"
    And the user is told "it is kept in memory and still written when complete"
    And the trace records "journal in memory only"

  @edge_case @disk @SR-7
  Scenario: A journal the operating system refuses to write falls back to memory like a full disk
    Given the operating system refuses to let write sessions save their content
    When the model streams 120 lines to "docs/guide.md" and DONE
    Then "docs/guide.md" holds the generated lines 1 to 120
    And the user is warned once "cannot save docs/guide.md's content to disk (EACCES"
    And Orion logged "keeping the content in memory only"

  @edge_case @cleanup @SR-8
  Scenario: Orphaned sessions older than an hour are removed when Orion starts
    When the model streams 40 lines to "docs/guide.md" without DONE
    And Orion crashes
    And Orion starts again 61 minutes later
    Then the journal of "docs/guide.md" is gone
    And the user is told "older than 1 h"
    And no recovery is offered

  # -- The controller and the journal ---------------------------------------------------------------

  @state_machine @SR-2
  Scenario: A successful begin opens the session, with its journal on disk
    When the model begins to create "docs/guide.md"
    Then the write session is waiting for content
    And the journal of "docs/guide.md" holds the plan

  @journal @SR-4
  Scenario: The journal reaches the disk every 50 lines while the message streams
    When the model has streamed 49 lines to "docs/guide.md" so far
    Then the journal of "docs/guide.md" holds 0 lines on disk
    When the model has streamed 1 more line so far
    Then the journal of "docs/guide.md" holds 50 lines on disk
    When the model has streamed 70 more lines so far
    Then the journal of "docs/guide.md" holds 100 lines on disk
    When the model streams 0 more lines without DONE
    Then the journal of "docs/guide.md" holds 120 lines on disk

  @journal @SR-4
  Scenario: The journal reaches the disk after 5 seconds with fewer than 50 lines
    When the model has streamed 10 lines to "docs/guide.md" so far
    And 4999 ms pass
    And the model has streamed 1 more line so far
    Then the journal of "docs/guide.md" holds 0 lines on disk
    When 1 ms passes
    Then the journal of "docs/guide.md" holds 11 lines on disk
    When the model has streamed 1 more line so far
    Then the journal of "docs/guide.md" holds 11 lines on disk

  @journal @SR-4
  Scenario: A stream that stalls is saved after 5 seconds although no more text arrives
    When the model has streamed 10 lines to "docs/guide.md" so far
    And 4999 ms pass
    Then the journal of "docs/guide.md" holds 0 lines on disk
    When 1 ms passes
    Then the journal of "docs/guide.md" holds 10 lines on disk

  @journal @recovery @SR-5
  Scenario: A crash loses at most what arrived since the last save
    When the model has streamed 120 lines to "docs/guide.md" so far
    And Orion crashes
    And the user lists the write sessions
    Then the list shows the write session of "docs/guide.md" with 100 lines

  @journal @recovery @SR-5
  Scenario: A session continued after a crash still loses at most what arrived since its last save
    When the model has streamed 120 lines to "docs/guide.md" so far
    And Orion crashes
    And the user recovers the write session of "docs/guide.md" with --continue
    And Orion starts again
    And the model continues after the last saved line with 60 more lines without DONE
    And Orion crashes
    And the user lists the write sessions
    Then the list shows the write session of "docs/guide.md" with 160 lines

  @protocol @WS-5
  Scenario: A DONE line with trailing spaces ends the content
    When the model writes "alpha\nbeta" to "notes.txt"
    Then the content of "notes.txt" is "alpha\nbeta\n"
    When the model begins to create "more.txt"
    And the model replies "gamma\nDONE   \n"
    Then the content of "more.txt" is "gamma\n"

  @protocol @idle @WS-7
  Scenario: Without DONE the model is asked after 2 seconds whether it is finished
    When the model streams 30 lines to "docs/guide.md" without DONE
    And 1999 ms pass
    Then the model is not asked anything
    When 1 ms passes
    Then the model is asked to reply DONE

  @protocol @SR-1 @SR-3
  Scenario: Finalizing makes no tool call and cleans up
    When the model streams 30 lines to "docs/guide.md" and DONE
    Then the model made 1 tool call
    And no write session directory is left

  @recovery @SR-8
  Scenario: At start, an orphaned session less than an hour old is offered for recovery
    When the model streams 250 lines to "docs/guide.md" without DONE
    And Orion crashes
    And Orion starts again 59 minutes later
    Then recovery of "docs/guide.md" is offered
    And the journal of "docs/guide.md" is still there
    And "docs/guide.md" does not exist

  @recovery @SR-8
  Scenario: Orion started from the command line offers to recover a crashed session
    Given the scenario's clock starts 10 minutes before the real time
    When the model streams 30 lines to "docs/guide.md" without DONE
    And Orion crashes
    And the user runs "orion run" with the script:
      """
      conversation:
        - user: "Hello."
        - model: {text: "Hello."}
      """
    Then the console shows "orphaned write session"
    And the console shows "orion sessions recover"
    And the journal of "docs/guide.md" is still there

  @recovery @SR-8
  Scenario: orion chat offers to recover a crashed session when it starts
    Given the scenario's clock starts 10 minutes before the real time
    When the model streams 30 lines to "docs/guide.md" without DONE
    And Orion crashes
    And the user opens "orion chat" and leaves at once
    Then the console shows "orphaned write session"
    And the command succeeds

  @recovery @SR-8
  Scenario: A session left open when Orion exits is offered for recovery too
    When the model streams 20 lines to "docs/guide.md" without DONE
    And Orion exits and starts again
    Then recovery of "docs/guide.md" is offered

  @risks @SR-11
  Scenario: A second begin while a session is open is refused
    When the model begins to create "docs/a.md"
    And the model begins to create "docs/b.md"
    Then the tool call is refused with a message containing "is still open"
    And a write session is open for "docs/a.md"
    When the model streams 3 lines to "docs/a.md" and DONE
    Then "docs/a.md" has 3 lines
    And "docs/b.md" does not exist

  @tools @SR-1
  Scenario: The begin result comes back as an ordinary tool message
    When the model begins to create "docs/guide.md"
    Then the prompt contains "\"stage\": \"awaiting_content\""
    And the model is asked 2 times

  # -- Validation ------------------------------------------------------------------------------

  @validation @WS-10 @SR-6
  Scenario: The repair loop runs on the content the session saved
    When the model writes "ok\nbad \xff byte" to "notes.txt"
    Then the model is asked for corrections of line 2
    When the model corrects line 2 to "good byte"
    Then the content of "notes.txt" is "ok\ngood byte\n"
    And "notes.txt" is valid UTF-8

  @validation @recovery @WS-11 @SR-9
  Scenario: Content recovered from disk is validated and repaired without a model
    When the model streams "ok\nbad \xff byte\n" as the content of "notes.txt" without DONE
    And Orion crashes
    And the user recovers the write session of "notes.txt" with --finalize
    Then the content of "notes.txt" is "ok\nbad  byte\n"
    And the recovery reports "the safe replacement changed 1 place(s)"
    And the model is not asked anything

  @trace @WS-12
  Scenario: Trace events are JSON and include the session's own events
    When the model streams 30 lines to "docs/guide.md" without DONE
    And 2000 ms pass
    And the model replies "DONE"
    Then every trace event is JSON
    And the trace records "write_session begin"
    And the trace records "wrote"
    And the trace holds none of the streamed content

  # -- Cleanup and the session commands -------------------------------------------------------

  @cleanup @SR-8
  Scenario: A session saved an hour ago or less is kept at start
    When the model streams 10 lines to "docs/guide.md" without DONE
    And Orion crashes
    And Orion starts again 60 minutes later
    Then recovery of "docs/guide.md" is offered

  @commands @SR-9
  Scenario: The list of sessions shows an orphan with its target and saved lines
    When the model streams 120 lines to "docs/guide.md" without DONE
    And Orion crashes
    And the user lists the write sessions
    Then the list shows the write session of "docs/guide.md" with 120 lines

  @commands @recovery @SR-9
  Scenario: Recovering with --finalize writes what was saved, without a model, and cleans up
    When the model streams 120 lines to "docs/guide.md" without DONE
    And Orion crashes
    And the user recovers the write session of "docs/guide.md" with --finalize
    Then "docs/guide.md" holds the generated lines 1 to 120
    And the recovery reports "(the model had not finished: the content may be incomplete)"
    And the journal of "docs/guide.md" is gone
    And the model is not asked anything

  @commands @recovery @SR-9
  Scenario: Recovering with --continue lets the next start ask the model to go on
    When the model streams 120 lines to "docs/guide.md" without DONE
    And Orion crashes
    And the user recovers the write session of "docs/guide.md" with --continue
    And Orion starts again
    Then the model is asked to continue
    And the prompt contains "120 lines are saved"
    And the prompt contains "> Line 120 of docs/guide.md."
    And the user is told "continuing write session"
    When the model streams 30 more lines and DONE
    Then "docs/guide.md" holds the generated lines 1 to 150
    And no write session directory is left

  @commands @SR-9
  Scenario: Discarding a session removes its journal and writes nothing
    When the model streams 20 lines to "docs/guide.md" without DONE
    And Orion crashes
    And the user discards the write session of "docs/guide.md"
    Then the journal of "docs/guide.md" is gone
    And "docs/guide.md" does not exist

  @commands @cleanup @SR-9
  Scenario: Cleaning removes the sessions saved more than an hour ago and keeps the others
    Given the "write_session" setting "orphan_ttl_ms" is 0
    When the model streams 20 lines to "docs/old.md" without DONE
    And Orion crashes
    And Orion starts again 90 minutes later
    And the model streams 10 lines to "docs/new.md" without DONE
    And Orion crashes
    And Orion starts again 1 minute later
    And the user cleans up the write sessions older than 1 hour
    Then the journal of "docs/old.md" is gone
    And the journal of "docs/new.md" is still there

  @commands @recovery @SR-9
  Scenario: orion sessions list and recover --finalize finish a crashed write from the command line
    Given the scenario's clock starts 10 minutes before the real time
    When the model streams 30 lines to "docs/guide.md" without DONE
    And Orion crashes
    And the user runs "orion sessions list"
    Then the console shows "docs/guide.md"
    And the command succeeds
    When the user runs "orion sessions recover <session> --finalize"
    Then the command succeeds
    And "docs/guide.md" holds the generated lines 1 to 30
    And the journal of "docs/guide.md" is gone

  @commands @cleanup @SR-9
  Scenario: orion sessions clean removes the sessions saved more than an hour ago by default
    Given the "write_session" setting "orphan_ttl_ms" is 0
    And the scenario's clock starts 100 minutes before the real time
    When the model streams 20 lines to "docs/old.md" without DONE
    And Orion crashes
    And Orion starts again 90 minutes later
    And the model streams 10 lines to "docs/new.md" without DONE
    And Orion crashes
    And the user runs "orion sessions clean"
    Then the command succeeds
    And the journal of "docs/old.md" is gone
    And the journal of "docs/new.md" is still there

  @commands @SR-10
  Scenario: A session of a running Orion is never touched by the commands
    When the model streams 20 lines to "docs/guide.md" without DONE
    And the user recovers the write session of "docs/guide.md" with --finalize
    Then Orion reports an error containing "owned by a running process"
    And "docs/guide.md" does not exist
    And the journal of "docs/guide.md" is still there
    When the user discards the write session of "docs/guide.md"
    Then Orion reports an error containing "it cannot be discarded from here"
    And the journal of "docs/guide.md" is still there

  # -- End to end ------------------------------------------------------------------------------

  @e2e @recovery @SR-4 @SR-5 @SR-8 @SR-9
  Scenario: A long write survives a crash: saved, recovered, continued and written
    When the model begins to create "docs/guide.md"
    Then the journal of "docs/guide.md" holds the plan
    When the model has streamed 60 lines so far
    Then the journal of "docs/guide.md" holds 50 lines on disk
    When Orion crashes
    And Orion starts again 5 minutes later
    Then recovery of "docs/guide.md" is offered
    When the user recovers the write session of "docs/guide.md" with --continue
    And Orion starts again
    Then the model is asked to continue
    And the prompt contains "50 lines are saved"
    When the model continues after the last saved line with 30 more lines and DONE
    Then "docs/guide.md" holds the generated lines 1 to 80
    And the model made 1 tool call
    And no write session directory is left

  @e2e @WS-13
  Scenario: No content is spammed to the user's console or the logs
    When the model streams 120 lines to "docs/guide.md" and is cut off with finish reason "length"
    And the model streams 130 more lines and DONE
    Then no notice to the user holds the streamed content
    And the trace holds none of the streamed content
    And nothing Orion logged or printed holds the streamed content

  # -- Acceptance criteria ---------------------------------------------------------------------

  @acceptance @WS-4
  Scenario: A 300-line file is written with no tool-call JSON carrying it
    When the model streams 300 lines to "docs/guide.md" and DONE
    Then "docs/guide.md" holds the generated lines 1 to 300
    And the model made 1 tool call
    And the conversation does not hold "Line 300 of docs/guide.md."

  @acceptance @WS-5 @WS-7
  Scenario: The model may end with DONE or wait for the idle prompt
    When the model streams 10 lines to "docs/a.md" and DONE
    Then "docs/a.md" has 10 lines
    When the model streams 10 lines to "docs/b.md" without DONE
    And 2000 ms pass
    And the model replies "DONE"
    Then "docs/b.md" has 10 lines

  # -- Risks, structure, UI --------------------------------------------------------------------

  @risks @journal @SR-4
  Scenario: Streaming does not touch the disk for every chunk
    When the model has streamed 30 lines to "docs/guide.md" so far
    Then the journal of "docs/guide.md" holds 0 lines on disk
    And the journal of "docs/guide.md" counts 0 lines

  @risks @journal @SR-4
  Scenario: Large content can be journaled more often
    Given the "write_session" setting "flush_lines" is 10
    When the model has streamed 25 lines to "docs/guide.md" so far
    Then the journal of "docs/guide.md" holds 20 lines on disk

  @journal @SR-3
  Scenario: The journal holds the plan, the content and the counts
    When the model streams 42 lines to "docs/guide.md" without DONE
    Then the journal of "docs/guide.md" holds the plan, the content, the counts and its owner's lock
    And the journal of "docs/guide.md" holds 42 lines on disk
    And the journal of "docs/guide.md" counts 42 lines
