Feature: smoke
  Scenario: Protocol 4: a message without DONE gets the idle prompt after 2000 ms and not before
    When the model streams 250 lines to "docs/guide.md" without DONE
    And 1999 ms pass
    Then the model is not asked anything
    When 1 ms passes
    Then the model is asked to reply DONE
    When the model replies "DONE"
    Then "docs/guide.md" has 250 lines
    And "docs/guide.md" holds the generated lines 1 to 250
    And no file outside the workspace changed
    And the trace holds none of the streamed content
