@faults @write_faults
Feature: A write survives the faults of its environment
  The disk fills up or turns read-only, a file-size limit stops the process, a plugin or the
  trace database fails, another program edits the file, another Orion appends to it, a
  directory is swapped for a link, a writer is killed, the connection breaks mid-reply, the
  endpoint fails. Every fault here is real: a tmpfs, a file-size limit, a read-only mount,
  real processes, a loopback endpoint. What Orion says is saved is saved, nothing is written
  where it must not be, and nothing is lost without a word (docs/design/write-faults.md).

  @WF-1 @WF-2 @disk
  Scenario: A full disk never gets "saved" said of a content it holds only part of: the content goes to a rescue file, and recovery refuses the part
    Given the workspace is on a disk with 1024 KiB of space
    And rescue files go to a directory of their own
    When the user runs "orion run" with a script that writes 60000 lines to "big.md"
    Then the command fails with exit code 1
    And the console shows "cannot save big.md's content to disk (ENOSPC" once
    And the console does not show "The content is saved in write session"
    And the console names a rescue file that holds the generated lines 1 to 60000 of "big.md"
    And "big.md" does not exist
    When the user runs "orion sessions recover <session> --finalize"
    Then the command fails with exit code 1
    And the console shows "holds only"
    And "big.md" does not exist

  @WF-1 @WF-2 @disk
  Scenario: A state directory that fills up before the write keeps the file as it was, says the content is saved, and recovery writes it
    Given the workspace has a file "notes.md" containing "the user's notes\n"
    And the directory ".orion" of the workspace is on a disk with 4096 KiB of space
    When the model begins to overwrite "notes.md"
    And the model has streamed 300 lines to "notes.md" so far
    And the disk holding ".orion" fills up
    And the model replies "DONE"
    Then the user is told "Could not write notes.md"
    And the user is told "No space left on device"
    And the user is told "The content is saved in write session"
    And "notes.md" is unchanged
    When the disk holding ".orion" has room again
    And the user recovers the write session of "notes.md" with --finalize
    Then "notes.md" holds the generated lines 1 to 300
    When the user undoes the write session of "notes.md"
    Then "notes.md" is unchanged

  @WF-2 @disk
  Scenario: Under a file-size limit the content can be saved nowhere, Orion says so, and recovery never writes the cut part
    Given rescue files go to a directory of their own
    When the user runs "orion run" with a script that writes 20000 lines to "big.md", with a file-size limit of 256 KiB
    Then the command fails with exit code 1
    And the console shows "EFBIG"
    And the console does not show "The content is saved in write session"
    And the console does not show "Traceback"
    And "big.md" does not exist
    When the user runs "orion sessions recover <session> --finalize"
    Then the command fails with exit code 1
    And "big.md" does not exist

  @WF-3 @trace
  Scenario: A plugin that fails on every transition is reported, and the write goes on
    Given a plugin "audit" fails with "OSError: the audit disk is gone" on every transition
    When the model writes "alpha\nbeta" to "notes.md"
    Then the content of "notes.md" is "alpha\nbeta\n"
    And the write session of "notes.md" is "written"
    And Orion logged "plugin audit failed in lifecycle_transition: OSError: the audit disk is gone"
    And the trace has a "error" event named "error in plugin"

  @WF-4 @trace
  Scenario Outline: A damaged orion.db (<damage>) stops no write, and says once that traces cannot be stored
    Given the workspace's orion.db is damaged (<damage>)
    When the model writes "alpha\nbeta" to "notes.md"
    And the model streams 3 lines to "docs/guide.md" and DONE
    Then the content of "notes.md" is "alpha\nbeta\n"
    And "docs/guide.md" holds the generated lines 1 to 3
    And Orion logged "cannot store traces" once

    Examples:
      | damage       |
      | garbage      |
      | truncated    |
      | directory    |
      | wrong schema |

  @WF-4 @trace
  Scenario: An orion.db another process holds locked stops no write
    Given another process holds the workspace's orion.db locked
    When the model writes "alpha\nbeta" to "notes.md"
    Then the content of "notes.md" is "alpha\nbeta\n"
    And Orion logged "cannot store traces" once

  @WF-5 @WF-1
  Scenario: A file another program rewrote while the content streamed is not overwritten; the content is saved, and recovery writes it onto the file as it is now
    Given the workspace has a file "notes.md" containing "first draft\n"
    When the model begins to overwrite "notes.md"
    And the model has streamed 3 lines to "notes.md" so far
    And the user changes "notes.md" to "final draft\n"
    And the model replies "DONE"
    Then the user is told "Could not write notes.md: notes.md changed since the plan was checked (another program or another Orion process wrote it); nothing written"
    And the user is told "The content is saved in write session"
    And the content of "notes.md" is "final draft\n"
    When the user recovers the write session of "notes.md" with --finalize
    Then "notes.md" holds the generated lines 1 to 3

  @WF-5
  Scenario: An append onto a file another program appended to meanwhile is refused, and recovery appends after both
    Given the workspace has a file "log.md" containing "first\n"
    When the model begins to append "log.md"
    And the model streams "from the model\n" as the content of "log.md" without DONE
    And the user changes "log.md" to "first\ntyped by the user\n"
    And 2000 ms pass
    And the model replies "DONE"
    Then the user is told "log.md changed since the plan was checked"
    And the content of "log.md" is "first\ntyped by the user\n"
    When the user recovers the write session of "log.md" with --finalize
    Then the content of "log.md" is "first\ntyped by the user\nfrom the model\n"

  @WF-6
  Scenario: Two processes appending to one file at the same time lose no append and write none twice
    Given the workspace has a file "shared.md" containing "# shared\n"
    When two processes append 40 lines each to "shared.md" at once, as write sessions do
    Then "shared.md" holds its first line and each process's lines, every one once

  @WF-7 @safety
  Scenario: A directory replaced by a link to another directory after the plan was checked makes the write fail, and nothing lands there
    Given the workspace has a directory "sub"
    And the workspace has a directory "archive"
    When the model begins to create "sub/notes.md"
    And the model has streamed 3 lines to "sub/notes.md" so far
    And another program replaces the directory "sub" with a link to "archive"
    And the model replies "DONE"
    Then the user is told "Could not write sub/notes.md: sub/notes.md now leads to archive/notes.md (a symbolic link changed since the plan was checked); nothing written"
    And "archive/notes.md" does not exist

  @WF-7 @safety
  Scenario: A directory replaced by a link to the outside after the plan was checked never leads the write outside
    Given the workspace has a directory "sub"
    When the model begins to create "sub/notes.md"
    And the model has streamed 3 lines to "sub/notes.md" so far
    And another program replaces the directory "sub" with a link to "../outside"
    And the model replies "DONE"
    Then the user is told "Could not write sub/notes.md"
    And the user is told "The content is saved in write session"
    And no file outside the workspace changed

  @WF-7 @safety
  Scenario: A directory swapped for a link to the outside while files are written into it never leads a write outside
    Given another process swaps the directory "sub" with a link to the outside, back and forth, as fast as it can
    When 300 plans write files into "sub" meanwhile
    Then no file outside the workspace changed
    And every write landed inside the workspace or was refused, and the directory was swapped meanwhile

  @WF-8
  Scenario: Starting Orion removes the temp file of a killed write and keeps that of a write still running, however long it has run
    Given a process was killed in the middle of writing "docs/big.md"
    And a process was killed in the middle of writing "node_modules/pkg/index.js"
    And another process has been writing "mine.md" for 2 hours
    When the user runs "orion run" with the script:
      """
      conversation:
        - user: Hello.
        - model: {text: Hello.}
      """
    Then the command succeeds
    And the console shows "removed 1 temp file(s) an interrupted write left"
    And the temp file of "docs/big.md" is gone
    And the temp file of "mine.md" is still there
    And the temp file of "node_modules/pkg/index.js" is still there

  @SR-7 @WF-2 @disk
  Scenario: A read-only file system under the journals degrades to memory, and the file is still written
    Given the directory ".orion/write_sessions" of the workspace is on a read-only disk
    When the model streams 60 lines to "docs/guide.md" and DONE
    Then "docs/guide.md" holds the generated lines 1 to 60
    And the user is warned once "cannot save docs/guide.md's content to disk (EROFS"
    And the write session of "docs/guide.md" is "written"

  @WS-21 @truncation
  Scenario: A connection that breaks in the middle of a reply keeps every line that arrived, and the model goes on
    Given a model endpoint on this machine
    And the endpoint then begins to create "notes.md"
    And the endpoint then streams 30 lines of "notes.md" and the connection breaks
    And the endpoint then streams 5 more lines of "notes.md" and DONE
    And the endpoint then replies "Written."
    When the user chats in "orion chat":
      """
      Write notes.md.
      """
    Then the command succeeds
    And the console shows "the connection broke in the middle of the reply"
    And "notes.md" holds the generated lines 1 to 35
    And the endpoint was asked 4 times

  @WS-21
  Scenario: An endpoint that fails a request is one line in orion chat, and the conversation goes on
    Given a model endpoint on this machine
    And the endpoint answers HTTP 503 "upstream unavailable" until the SDK's retries are used up
    And the endpoint then replies "Hello again."
    When the user chats in "orion chat":
      """
      Hello?
      Anyone?
      """
    Then the command succeeds
    And the console shows "HTTP 503" once
    And the console shows "upstream unavailable; the conversation is kept, type your next message or /quit"
    And the console shows "Hello again."
    And the endpoint was asked 5 times
