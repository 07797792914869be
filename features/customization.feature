@customization
Feature: A team's chart keeps what Orion's code relies on
  A team replaces Orion's write-session chart with its own, or extends it with an overlay.
  Orion's code still sends the triggers and asks the tags the chart's contract lists; a chart
  that lost one is refused, with the line that lost it, before anything runs; a chart that
  renames states and keeps their tags runs; a name that does not exist is an error, never a
  silent "no" (docs/design/customization.md).

  @CU-1 @config
  Scenario: A replacement chart that no longer handles a trigger of the contract is refused before anything runs
    Given the workspace has Orion's "write_session" chart as "lifecycles/write_session.yaml", with these changes:
      | from               | to                     |
      | - trigger: valid\n | - trigger: validated\n |
    And the workspace's orion.yaml is:
      """
      statecharts: [lifecycles/write_session.yaml]
      """
    When the user runs "orion check"
    Then the command fails with exit code 1
    And the console shows "no transition of 'write_session' handles trigger 'valid', which the runtime sends (contract of built-in write_session); was 'validated' renamed from it?"
    When the user runs "orion run hello"
    Then the command fails with exit code 2
    And the console shows "the workspace's statecharts have errors; nothing was run"
    And "lifecycles/write_session.yaml" exists
    And no file outside the workspace changed

  @CU-1 @config
  Scenario: A replacement chart whose renamed state lost its tag is refused, naming the tag and the state
    Given the workspace has Orion's "write_session" chart as "lifecycles/write_session.yaml", with these changes:
      | from                                | to                                |
      | finalizing:\n        description    | checking:\n        description    |
      | tags: finalizing                    | tags: checked                     |
      | session_active.finalizing           | session_active.checking           |
    And the workspace's orion.yaml is:
      """
      statecharts: [lifecycles/write_session.yaml]
      """
    When the user runs "orion check"
    Then the command fails with exit code 1
    And the console shows "no state of 'write_session' has tag 'finalizing', which the runtime asks about (contract of built-in write_session)"

  @CU-1 @config
  Scenario: A chart written for an older contract runs migrated with a warning, and orion migrate brings it up to date in place
    Given the workspace has Orion's "write_session" chart as "lifecycles/write_session.yaml", with these changes:
      | from | to |
      | version: 3\n  triggers: [begin, message_end, content, truncated, unfinished, | version: 2\n  triggers: [begin, message_end, content, truncated, |
      | - id: ask_unfinished\n    trigger: unfinished\n    description: >-\n      The message stopped cleanly in the middle of a line, without DONE: a file may end that\n      way (a VERSION file), or a gateway reported a cut-off as stop. The model is asked at once\n      whether the file ends there, or to send that line again, whole, and go on.\n    source: [session_active.awaiting_content, session_active.awaiting_done_or_more_content,\n             session_active.continuing]\n    dest: session_active.awaiting_done_or_more_content\n    actions: ask_about_unfinished_line\n\n  - trigger: content | - trigger: content |
    And the workspace's orion.yaml is:
      """
      statecharts: [lifecycles/write_session.yaml]
      """
    When the user runs "orion check"
    Then the command succeeds
    And the console shows "no transition of 'write_session' handles trigger 'unfinished' (contract version 3 of built-in write_session, Orion 0.2.0; this chart was written for version 2)"
    And the console shows "it runs migrated for this release; `orion migrate"
    When the user runs "orion migrate lifecycles/write_session.yaml"
    Then the command succeeds
    And "lifecycles/write_session.yaml" contains "contract:\n  version: 3\n"
    And "lifecycles/write_session.yaml" contains "trigger: unfinished\n"
    When the user runs "orion check"
    Then the command succeeds
    And the console does not show "runs migrated"
    When the model streams 3 lines to "docs/guide.md" and DONE
    Then "docs/guide.md" holds the generated lines 1 to 3

  @CU-1 @config
  Scenario: An overlay that removes the only transition of a contract trigger is refused at its own line
    Given the workspace has a file "lifecycles/mine.yaml" containing:
      """
      extends: write_session
      transitions:
        remove: [circular]
      """
    And the workspace's orion.yaml is:
      """
      statecharts: [lifecycles/mine.yaml]
      """
    When the user runs "orion check"
    Then the command fails with exit code 1
    And the console shows "lifecycles/mine.yaml"
    And the console shows "handles trigger 'circular', which the runtime sends"

  @CU-2 @truncation
  Scenario: A chart that renames the write session's states and keeps their tags writes as Orion's does
    Given the workspace has Orion's "write_session" chart as "lifecycles/write_session.yaml", with these changes:
      | from                          | to                        |
      | awaiting_done_or_more_content | waiting_for_more          |
      | finalizing:\n                 | checking:\n               |
      | session_active.finalizing     | session_active.checking   |
    And the workspace's orion.yaml is:
      """
      statecharts: [lifecycles/write_session.yaml]
      """
    And the "write_session" setting "max_continuations" is 1
    When the model streams 3 lines to "docs/guide.md" without DONE
    And 2000 ms pass
    Then the model is asked to reply DONE
    And the write session is waiting for DONE or more content
    When the model streams 3 more lines and is cut off with finish reason "length"
    Then the model is asked to continue
    When the model streams 3 more lines and is cut off with finish reason "length"
    Then "docs/guide.md" holds the generated lines 1 to 9
    And the write session of "docs/guide.md" is "incomplete"
    And the write session went through "session_active.waiting_for_more", "session_active.continuing" and "session_active.checking"

  @CU-2
  Scenario: A chart that renames the state a write waits in after a pause still gets its idle prompt and its DONE
    Given the workspace has Orion's "write_session" chart as "lifecycles/write_session.yaml", with these changes:
      | from                          | to               |
      | awaiting_done_or_more_content | waiting_for_more |
    And the workspace's orion.yaml is:
      """
      statecharts: [lifecycles/write_session.yaml]
      """
    When the model streams 3 lines to "docs/guide.md" without DONE
    And 2000 ms pass
    And the model replies "DONE"
    Then "docs/guide.md" holds the generated lines 1 to 3
    And the write session went from waiting for content to waiting for DONE or more content to checking the content to written

  @CU-3
  Scenario: An unknown trigger, a trigger not allowed here and an unknown tag are refused, never answered "no"
    Given the statechart:
      """
      statechart: review
      initial: draft
      states:
        draft: {tags: editing}
        review: {tags: [reviewing, open]}
        published: {final: true, tags: done}
      transitions:
        - {trigger: submit, source: draft, dest: review}
        - {trigger: publish, source: review, dest: published}
      """
    When the event "sumbit" is sent
    Then Orion reports an error containing "review: unknown trigger 'sumbit' (the statechart defines: publish, submit)"
    When the event "publish" is sent
    Then Orion reports an error containing "trigger 'publish' is not allowed in state 'draft' (allowed here: submit)"
    When the code asks the chart whether it has the tag "reviewing"
    Then the answer is "no"
    When the code asks the chart whether it has the tag "reveiwing"
    Then Orion reports an error containing "review: unknown tag 'reveiwing' (the statechart's states have: done, editing, open, reviewing); did you mean 'reviewing'?"
    When the event "submit" is sent
    And the code asks the chart whether it has the tag "reviewing"
    Then the answer is "yes"
    When the event "publish" is sent
    And the event "publish" is sent
    Then Orion reports an error containing "trigger 'publish' is not allowed in state 'published' (allowed here: none)"

  @CU-4 @idle
  Scenario: An overlay that changes a setting's default, a transition's destination and adds a state keeps the rest
    Given the workspace has a file "lifecycles/review.yaml" containing:
      """
      extends: write_session
      settings:
        idle_ms: {default: 500}
      contract:
        tags: [review]
      states:
        review:
          tags: review
      transitions:
        replace:
          valid: {dest: review, actions: []}
          discard: {source: [idle, session_active, review]}
        insert:
          - {trigger: approve_write, source: review, dest: done, actions: finalize, before: discard}
      """
    And the workspace's orion.yaml is:
      """
      statecharts: [lifecycles/review.yaml]
      """
    When the model streams 3 lines to "docs/guide.md" without DONE
    And 499 ms pass
    Then the model is not asked to reply DONE
    When 1 ms passes
    Then the model is asked to reply DONE
    When the model replies "DONE"
    Then "docs/guide.md" does not exist
    And the write session is in state "review"

  @CU-4 @config
  Scenario: An overlay's edit of a transition the base does not have is located in the overlay, with the ids there are
    Given the workspace has a file "lifecycles/review.yaml" containing:
      """
      extends: write_session
      transitions:
        replace:
          vaild: {dest: done}
      """
    And the workspace's orion.yaml is:
      """
      statecharts: [lifecycles/review.yaml]
      """
    When the user runs "orion check"
    Then the command fails with exit code 1
    And the console shows "lifecycles/review.yaml:4:5: 'vaild' is not the id of a transition of 'write_session'"
    And the console shows "did you mean 'valid'?"

  @CU-5 @safety
  Scenario: A guard whose plugin raises holds the write it guards, names the plugin and keeps the content
    Given the workspace has a file "lifecycles/security.yaml" containing:
      """
      extends: write_session
      states:
        security_review: {tags: security_review}
      transitions:
        insert:
          - {trigger: valid, before: valid, source: session_active.finalizing, dest: security_review, guards: needs_security_review}
          - {trigger: approve_security, source: security_review, dest: done, actions: finalize}
      """
    And the workspace's orion.yaml is:
      """
      statecharts: [lifecycles/security.yaml]
      """
    And a plugin "beta_docs" provides the guard "needs_security_review", which fails with "AttributeError: 'WriteSessionView' object has no attribute 'plan'"
    When the model streams 3 lines to "security/keys.md" and DONE
    Then "security/keys.md" does not exist
    And the write session of "security/keys.md" is "failed"
    And the journal of "security/keys.md" is still there
    And the user is told "security/keys.md is held, not written: write_session: plugin 'beta_docs' failed in guard 'needs_security_review'"
    And the model is told "deciding 'valid' in state 'session_active.finalizing': AttributeError: 'WriteSessionView' object has no attribute 'plan'; no transition was taken"
