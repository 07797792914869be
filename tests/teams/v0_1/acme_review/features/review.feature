Feature: ACME's writes wait for the user's review
  ACME's copy of the write_session chart sends a complete, valid write to `review` instead of
  writing it: /approve writes it, /reject drops it. ACME's validator asks the model to finish
  every TODO first. Orion's step library, and three steps of ACME's own (tests/test_review.py).

  Scenario: DONE alone does not write: the write waits for the user's review
    When the model streams 30 lines to "docs/guide.md" and DONE
    Then the write of "docs/guide.md" waits for the user's review
    And "docs/guide.md" does not exist
    And the model is not asked anything
    When 10 seconds pass
    Then "docs/guide.md" does not exist

  Scenario: /approve writes the reviewed content once
    When the model streams 30 lines to "docs/guide.md" and DONE
    And the user types "/approve"
    Then "docs/guide.md" holds the generated lines 1 to 30
    And the model is told "Created docs/guide.md (30 lines"
    When the model replies "Thanks."
    Then the command answers "Approved: Created docs/guide.md (30 lines"
    And no write session is open
    And no write session directory is left

  Scenario: /reject drops the write
    When the model streams 20 lines to "docs/guide.md" and DONE
    And the user types "/reject"
    Then "docs/guide.md" does not exist
    And the model is told "abandoned: the user rejected it"
    When the model replies "Understood."
    Then the command answers "Rejected: docs/guide.md was not written."
    And no write session directory is left

  Scenario: /approve with nothing to review changes nothing
    When the user types "/approve"
    Then the command answers "Nothing waits for review."
    And the model is not asked anything

  Scenario: the model is told what waits while it waits
    When the model streams 20 lines to "docs/guide.md" and DONE
    And the user says "Is it written?"
    And the model replies "It waits for your review."
    Then the system prompt contains "docs/guide.md is complete and waits for the user's review"
    And "docs/guide.md" does not exist

  Scenario: the idle prompt still asks for DONE, and DONE still only leads to the review
    When the model streams 40 lines to "docs/guide.md" without DONE
    And 2000 ms pass
    Then the model is asked to reply DONE
    When the model replies "DONE"
    Then the write of "docs/guide.md" waits for the user's review
    When the user approves the write
    Then "docs/guide.md" holds the generated lines 1 to 40

  Scenario: a TODO is sent back to the model before the review
    When the model streams "# Guide\nTODO: the introduction\nThe end.\n" as the content of "docs/guide.md" and DONE
    Then the model is asked for corrections of line 2
    And "docs/guide.md" does not exist
    When the model corrects line 2 to "Orion writes large files as plain text."
    Then the write of "docs/guide.md" waits for the user's review
    When the user approves the write
    Then "docs/guide.md" contains "Orion writes large files as plain text."
    And "docs/guide.md" does not contain "TODO"

  Scenario: a file without a TODO goes to the review without corrections
    When the model streams "# Guide\nAll done.\n" as the content of "docs/guide.md" and DONE
    Then the model is not asked for corrections
    And the write of "docs/guide.md" waits for the user's review

  Scenario: /reset sets a write that waits for review aside, unwritten
    When the model streams 20 lines to "docs/guide.md" and DONE
    And the user types "/reset"
    Then the write session of "docs/guide.md" is "set_aside"
    And "docs/guide.md" does not exist
    When the user types "/approve"
    Then the command answers "Nothing waits for review."

  Scenario: a write that waited for review when Orion exited comes back to it with --continue
    When the model streams 20 lines to "docs/guide.md" and DONE
    Then the write of "docs/guide.md" waits for the user's review
    When Orion exits and starts again
    Then recovery of "docs/guide.md" is offered
    And "docs/guide.md" does not exist
    When the user recovers the write session of "docs/guide.md" with --continue
    And Orion starts again
    Then the model is not asked anything
    When the user approves the write
    Then "docs/guide.md" holds the generated lines 1 to 20
