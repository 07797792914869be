@team
Feature: A write waits for the user's review (the team's write session)
  The team's write_session statechart sends a session whose content is complete and valid to
  `review` instead of writing it. Only /approve-write writes the file; /reject-write drops it.
  The scenarios use Orion's step library and a few steps of the team's own (tests/test_review.py).

  Scenario: DONE alone does not write: the write waits for the user's review
    When the model streams 250 lines to "docs/guide.md" and DONE
    Then the write of "docs/guide.md" waits for the user's review
    And the model is not asked anything
    When 10 seconds pass
    Then "docs/guide.md" does not exist
    And the model is not asked anything
    When the user says "Is it written?"
    And the model replies "It waits for your review."
    Then the system prompt contains "The content of docs/guide.md is complete and waits for the user's review"
    And the system prompt does not contain "A write session is open"
    And "docs/guide.md" does not exist

  Scenario: /approve-write writes the reviewed content once
    When the model streams 250 lines to "docs/guide.md" and DONE
    And the user approves the write
    Then "docs/guide.md" holds the generated lines 1 to 250
    And the model is told "Created docs/guide.md (250 lines"
    And the write session went through "awaiting_content", "finalizing", "review" and "done"
    When the model replies "Thanks for the review."
    Then the command answers "Approved: Created docs/guide.md (250 lines"
    And no write session is open
    And no write session directory is left
    And no file outside the workspace changed

  Scenario: the idle prompt still asks for DONE, and DONE still only leads to the review
    When the model streams 100 lines to "docs/guide.md" without DONE
    And 2000 ms pass
    Then the model is asked to reply DONE
    When the model replies "DONE"
    Then the write of "docs/guide.md" waits for the user's review
    When the user approves the write
    Then "docs/guide.md" holds the generated lines 1 to 100

  Scenario: /reject-write drops the write
    When the model streams 20 lines to "docs/guide.md" and DONE
    And the user rejects the write
    Then "docs/guide.md" does not exist
    And the model is told "abandoned: the user rejected the write"
    When the model replies "Understood, I will not write it."
    Then the command answers "Rejected: docs/guide.md was not written."
    And no write session directory is left

  Scenario: /approve-write with nothing to review changes nothing
    When the user types "/approve-write"
    Then the command answers "No write waits for review."
    And the model is not asked anything

  Scenario: /reset sets a write that waits for review aside, unwritten
    When the model streams 20 lines to "docs/guide.md" and DONE
    And the user types "/reset"
    Then the write session of "docs/guide.md" is "set_aside"
    And the user is told "was set aside (the conversation was reset before the review)"
    And "docs/guide.md" does not exist
    When the user types "/approve-write"
    Then the command answers "No write waits for review."

  Scenario: a write that waited for review when Orion exited comes back to the review with --continue
    When the model streams 20 lines to "docs/guide.md" and DONE
    Then the write of "docs/guide.md" waits for the user's review
    When Orion exits and starts again
    Then recovery of "docs/guide.md" is offered
    And "docs/guide.md" does not exist
    When the user recovers the write session of "docs/guide.md" with --continue
    And Orion starts again
    Then the user is told "for docs/guide.md is back in state review"
    And the model is not asked anything
    When the user approves the write
    Then "docs/guide.md" holds the generated lines 1 to 20
    And the model is told "Created docs/guide.md (20 lines"
    And no write session directory is left
