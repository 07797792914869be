Feature: Beta's security documents wait for the security review
  Beta's overlay sends a valid document under security/ to `security_review`; /security-ok
  writes it. Every other document is written at once. Every Markdown file starts with the
  licence header.

  Scenario: a security document is not written before the security review
    When the model streams "<!-- SPDX-License-Identifier: Apache-2.0 -->\n# Policy\nRotate keys.\n" as the content of "security/policy.md" and DONE
    Then "security/policy.md" does not exist
    And the user is told "security/policy.md waits for the security review"
    And the write session is in state "security_review"

  Scenario: /security-ok writes the security document once
    When the model streams "<!-- SPDX-License-Identifier: Apache-2.0 -->\n# Policy\nRotate keys.\n" as the content of "security/policy.md" and DONE
    And the user types "/security-ok"
    Then "security/policy.md" contains "Rotate keys."
    And the model is told "Created security/policy.md (3 lines"
    When the model replies "Thanks."
    Then the command answers "Security review passed: Created security/policy.md (3 lines"
    And no write session directory is left

  Scenario: any other document is written at once
    When the model streams "<!-- SPDX-License-Identifier: Apache-2.0 -->\n# Guide\nRead me.\n" as the content of "docs/guide.md" and DONE
    Then "docs/guide.md" contains "Read me."
    And the user is not told "waits for the security review"

  Scenario: a document without the licence header is sent back to the model
    When the model streams "# Guide\nRead me.\n" as the content of "docs/guide.md" and DONE
    Then the model is asked for corrections of line 1
    And "docs/guide.md" does not exist
    When the model corrects line 1 to "<!-- SPDX-License-Identifier: Apache-2.0 -->"
    Then "docs/guide.md" contains "<!-- SPDX-License-Identifier: Apache-2.0 -->"

  Scenario: /security-ok with nothing to review changes nothing
    When the user types "/security-ok"
    Then the command answers "Nothing waits for the security review."
    And the model is not asked anything
